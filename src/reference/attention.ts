/**
 * Float64 references for the attention kernels (src/kernels/attention.ts).
 *
 * Layouts (row-major, the same as the GPU kernels):
 *   q, o, dO      [B, S, nH, hd]
 *   K_j, V_j      [B, S, nKV, hd]  one array per TTT step j = 0..k (`kSteps[j]`, `vSteps[j]`)
 *   mask          [B, S]           1 = real token, 0 = padding
 *   lse           [B, nH, S]
 * Query head h reads kv head h / (nH / nKV).
 *
 * `tttAttentionRef` is written literally after docs/eagle3.md §4: for query row t at
 * step k, S step-0 scores with an additive mask (0 where u ≤ t and attention_mask[u] = 1, else
 * finfo(float32).min), then k "diagonal" scores q[t]·K_j[t]/√hd, a softmax over the S + k scores,
 * and Σ_u p_0[u] V_0[u] + Σ_j p_j V_j[t].
 *
 * One documented deviation: a query row with no allowed key at all (only possible at step 0, for
 * a row whose every key u ≤ t is padding) gets output 0, lse 0 and zero gradients. PyTorch's
 * additive-mask softmax would average every value row there; such rows are padding and carry no
 * loss, and the GPU kernels choose zeros so that nothing NaN or arbitrary leaks out of them.
 *
 * `causalAttentionRef` is an independent, plain formulation of causal + key-padding attention
 * (loops over the allowed keys only), used to check that step 0 of the TTT scheme equals it.
 */

/** finfo(torch.float32).min: the additive value PyTorch uses for blocked entries. */
export const F32_MIN = -3.4028234663852886e38;

export interface AttentionDims {
  batch: number;
  seq: number;
  heads: number;
  kvHeads: number;
  headDim: number;
}

export interface TttDims extends AttentionDims {
  /** Unroll step k (0-based): uses kSteps[0..k] and vSteps[0..k]. */
  step: number;
}

export interface AttentionRefForward {
  o: Float64Array;
  lse: Float64Array;
}

export interface TttRefGrads {
  dq: Float64Array;
  /** dK_j / dV_j for j = 0..k, each [B, S, nKV, hd], summed over the query heads of each group. */
  dk: Float64Array[];
  dv: Float64Array[];
}

type Arr = ArrayLike<number>;

function checkDims(d: TttDims, q: Arr, kSteps: readonly Arr[], vSteps: readonly Arr[], mask: Arr): void {
  const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D, step } = d;
  if (H % G !== 0) throw new Error(`attention reference: heads ${H} is not a multiple of kvHeads ${G}`);
  if (q.length !== B * S * H * D) throw new Error(`attention reference: q has ${q.length} values, need ${B * S * H * D}`);
  if (mask.length !== B * S) throw new Error(`attention reference: mask has ${mask.length} values, need ${B * S}`);
  if (kSteps.length < step + 1 || vSteps.length < step + 1) {
    throw new Error(`attention reference: step ${step} needs ${step + 1} K/V arrays, got ${kSteps.length}/${vSteps.length}`);
  }
  for (let j = 0; j <= step; j++) {
    if (kSteps[j].length !== B * S * G * D || vSteps[j].length !== B * S * G * D) {
      throw new Error(`attention reference: K/V of step ${j} must have ${B * S * G * D} values`);
    }
  }
}

/**
 * Scores (already including the additive mask) and softmax probabilities of one (b, h, t) row,
 * over the S step-0 keys followed by the k diagonal keys. `empty` marks a row with no allowed key.
 */
function rowProbs(
  d: TttDims,
  q: Arr,
  kSteps: readonly Arr[],
  mask: Arr,
  b: number,
  h: number,
  t: number,
): { p: Float64Array; lse: number; empty: boolean } {
  const { seq: S, heads: H, kvHeads: G, headDim: D, step: k } = d;
  const g = Math.floor(h / (H / G));
  const scale = 1 / Math.sqrt(D);
  const qo = ((b * S + t) * H + h) * D;
  const s = new Float64Array(S + k);
  let allowedAny = k > 0;
  for (let u = 0; u < S; u++) {
    const ko = ((b * S + u) * G + g) * D;
    let dot = 0;
    for (let e = 0; e < D; e++) dot += q[qo + e] * kSteps[0][ko + e];
    const allowed = u <= t && mask[b * S + u] === 1;
    if (allowed) allowedAny = true;
    s[u] = dot * scale + (allowed ? 0 : F32_MIN);
  }
  for (let j = 1; j <= k; j++) {
    const ko = ((b * S + t) * G + g) * D;
    let dot = 0;
    for (let e = 0; e < D; e++) dot += q[qo + e] * kSteps[j][ko + e];
    s[S + j - 1] = dot * scale;
  }
  if (!allowedAny) return { p: new Float64Array(S + k), lse: 0, empty: true };
  let max = -Infinity;
  for (const x of s) max = Math.max(max, x);
  let sum = 0;
  for (const x of s) sum += Math.exp(x - max);
  const p = s.map((x) => Math.exp(x - max) / sum);
  return { p, lse: max + Math.log(sum), empty: false };
}

/** Forward of the cache_hidden ("diagonal") TTT attention at step d.step. */
export function tttAttentionRef(q: Arr, kSteps: readonly Arr[], vSteps: readonly Arr[], mask: Arr, d: TttDims): AttentionRefForward {
  checkDims(d, q, kSteps, vSteps, mask);
  const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D, step: k } = d;
  const o = new Float64Array(B * S * H * D);
  const lse = new Float64Array(B * H * S);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / (H / G));
      for (let t = 0; t < S; t++) {
        const { p, lse: l } = rowProbs(d, q, kSteps, mask, b, h, t);
        lse[(b * H + h) * S + t] = l;
        const oo = ((b * S + t) * H + h) * D;
        for (let u = 0; u < S; u++) {
          const vo = ((b * S + u) * G + g) * D;
          for (let e = 0; e < D; e++) o[oo + e] += p[u] * vSteps[0][vo + e];
        }
        for (let j = 1; j <= k; j++) {
          const vo = ((b * S + t) * G + g) * D;
          for (let e = 0; e < D; e++) o[oo + e] += p[S + j - 1] * vSteps[j][vo + e];
        }
      }
    }
  }
  return { o, lse };
}

/**
 * Backward of tttAttentionRef given dO: with p the row's probabilities over the S + k scores and
 * dp = dO·V, ds = p ⊙ (dp − Σ p·dp); dq = Σ ds·K/√hd, dK += ds·q/√hd, dV += p·dO. Blocked
 * entries have p = 0 exactly, so they contribute nothing.
 */
export function tttAttentionBackwardRef(
  q: Arr,
  kSteps: readonly Arr[],
  vSteps: readonly Arr[],
  mask: Arr,
  dO: Arr,
  d: TttDims,
): TttRefGrads {
  checkDims(d, q, kSteps, vSteps, mask);
  const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D, step: k } = d;
  const scale = 1 / Math.sqrt(D);
  const dq = new Float64Array(B * S * H * D);
  const dk = Array.from({ length: k + 1 }, () => new Float64Array(B * S * G * D));
  const dv = Array.from({ length: k + 1 }, () => new Float64Array(B * S * G * D));
  // Key row of score index i for query row t: (step j, row) = (0, i) or (i − S + 1, t).
  const keyOf = (i: number, t: number): [number, number] => (i < S ? [0, i] : [i - S + 1, t]);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / (H / G));
      for (let t = 0; t < S; t++) {
        const { p, empty } = rowProbs(d, q, kSteps, mask, b, h, t);
        if (empty) continue;
        const qo = ((b * S + t) * H + h) * D;
        const dp = new Float64Array(S + k);
        let pdp = 0;
        for (let i = 0; i < S + k; i++) {
          const [j, row] = keyOf(i, t);
          const vo = ((b * S + row) * G + g) * D;
          let dot = 0;
          for (let e = 0; e < D; e++) dot += dO[qo + e] * vSteps[j][vo + e];
          dp[i] = dot;
          pdp += p[i] * dot;
        }
        for (let i = 0; i < S + k; i++) {
          if (p[i] === 0) continue;
          const [j, row] = keyOf(i, t);
          const ko = ((b * S + row) * G + g) * D;
          const ds = p[i] * (dp[i] - pdp);
          for (let e = 0; e < D; e++) {
            dq[qo + e] += ds * kSteps[j][ko + e] * scale;
            dk[j][ko + e] += ds * q[qo + e] * scale;
            dv[j][ko + e] += p[i] * dO[qo + e];
          }
        }
      }
    }
  }
  return { dq, dk, dv };
}

/**
 * Plain causal attention with key padding, formulated independently of the TTT reference: only
 * allowed keys (u ≤ t, mask[u] = 1) enter the softmax; a row with none outputs zeros.
 */
export function causalAttentionRef(q: Arr, k: Arr, v: Arr, mask: Arr, d: AttentionDims): AttentionRefForward {
  const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D } = d;
  const scale = 1 / Math.sqrt(D);
  const o = new Float64Array(B * S * H * D);
  const lse = new Float64Array(B * H * S);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / (H / G));
      for (let t = 0; t < S; t++) {
        const keys: number[] = [];
        for (let u = 0; u <= t; u++) if (mask[b * S + u] === 1) keys.push(u);
        if (keys.length === 0) continue;
        const qo = ((b * S + t) * H + h) * D;
        const scores = keys.map((u) => {
          let dot = 0;
          for (let e = 0; e < D; e++) dot += q[qo + e] * k[((b * S + u) * G + g) * D + e];
          return dot * scale;
        });
        const max = Math.max(...scores);
        const w = scores.map((x) => Math.exp(x - max));
        const sum = w.reduce((a, x) => a + x, 0);
        lse[(b * H + h) * S + t] = max + Math.log(sum);
        keys.forEach((u, i) => {
          for (let e = 0; e < D; e++) o[qo + e] += (w[i] / sum) * v[((b * S + u) * G + g) * D + e];
        });
      }
    }
  }
  return { o, lse };
}
