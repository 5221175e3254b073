/**
 * Float64 reference of the attention-probability kernel (src/kernels/attention-probs.ts): the
 * softmax of one sequence's TTT attention at one step, written out with the same column layout.
 *
 * For sequence b, head h, query row i at step k (docs/eagle3.md §4): the visible keys are the
 * step-0 keys u ≤ i with mask[b, u] = 1 and the diagonal keys K_j[i], j = 1..k. Their scores are
 * q_k[i]·key / √hd; P is the softmax over exactly those scores, 0 elsewhere. A row with no visible
 * key is all zeros (the kernels' convention for such rows, see src/reference/attention.ts).
 *
 * Layouts: q [B, S, nH, hd] (this step's queries), kSteps[j] [B, S, nKV, hd] for j = 0..k,
 * mask [B, S]; the result is [nH, S, W] with W = S + slots − 1 (column u < S: step-0 key u,
 * column S + j − 1: diagonal key j).
 */

export interface AttentionProbsRefDims {
  batch: number;
  seq: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  step: number;
  sample: number;
  slots: number;
}

type Arr = ArrayLike<number>;

export function attentionProbsRef(q: Arr, kSteps: readonly Arr[], mask: Arr, d: AttentionProbsRefDims): Float64Array {
  const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D, step: k, sample: b, slots } = d;
  if (H % G !== 0) throw new Error(`attention probs reference: heads ${H} is not a multiple of kvHeads ${G}`);
  if (k < 0 || k >= slots) throw new Error(`attention probs reference: step ${k} is outside [0, ${slots})`);
  if (b < 0 || b >= B) throw new Error(`attention probs reference: sample ${b} is outside [0, ${B})`);
  if (q.length !== B * S * H * D) throw new Error(`attention probs reference: q has ${q.length} values, need ${B * S * H * D}`);
  if (mask.length !== B * S) throw new Error(`attention probs reference: mask has ${mask.length} values, need ${B * S}`);
  if (kSteps.length < k + 1 || kSteps.slice(0, k + 1).some((kj) => kj.length !== B * S * G * D)) {
    throw new Error(`attention probs reference: step ${k} needs ${k + 1} key arrays of ${B * S * G * D} values`);
  }
  const W = S + slots - 1;
  const out = new Float64Array(H * S * W);
  const scale = 1 / Math.sqrt(D);
  const dot = (qo: number, kj: Arr, ko: number) => {
    let s = 0;
    for (let e = 0; e < D; e++) s += q[qo + e] * kj[ko + e];
    return s * scale;
  };
  for (let h = 0; h < H; h++) {
    const g = Math.floor(h / (H / G));
    for (let i = 0; i < S; i++) {
      const qo = ((b * S + i) * H + h) * D;
      // (column, score) of every visible key of this row.
      const visible: [number, number][] = [];
      for (let u = 0; u <= i; u++) if (mask[b * S + u] === 1) visible.push([u, dot(qo, kSteps[0], ((b * S + u) * G + g) * D)]);
      for (let j = 1; j <= k; j++) visible.push([S + j - 1, dot(qo, kSteps[j], ((b * S + i) * G + g) * D)]);
      if (visible.length === 0) continue;
      const max = Math.max(...visible.map(([, s]) => s));
      let sum = 0;
      for (const [, s] of visible) sum += Math.exp(s - max);
      const row = (h * S + i) * W;
      for (const [c, s] of visible) out[row + c] = Math.exp(s - max) / sum;
    }
  }
  return out;
}
