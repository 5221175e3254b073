/**
 * Draft insight (docs/insight.md): what the EAGLE3 draft of a live training session does on ONE
 * held-out sample, read from the GPU with the session's current weights.
 *
 * A capture runs the strategy's gradient-free held-out forward (`Eagle3TrainStrategy.evaluate`, the
 * path the periodic evaluation runs) on the resident held-out batch that holds the sample, with
 * read-only taps (model/eagle3/forward.ts `Eagle3EvalTaps`) that encode, while each step's tensors
 * are live:
 *   - attention/probs (src/kernels/attention-probs.ts) for that sample at every TTT step, from the
 *     step's RoPE'd queries, the K cache, the mask and the forward's own log-sum-exp;
 *   - a copy of that sample's S logits rows per step, and of its rows of the teacher's argmax tokens.
 * Only those (one sample's worth) are read back. No optimizer step, no gradient buffer, no weight,
 * moment, counter or RNG stream is touched, so training is bit-identical with and without captures
 * (test/training/evaluation/draft-insight.test.ts runs both).
 *
 * From the read-back logits the host forms, per position and TTT step, the softmax and its top k
 * (draft ids mapped to target ids through d2t), and the argmax with the metric kernel's tie rule
 * (lowest draft id), so `correct` is the held-out accuracy's own per-position term.
 *
 * Position conventions (docs/eagle3.md §3, §5): row t of step k embeds ids[t + k] (0 past the end)
 * and is scored against the teacher's token tok[t + k] under the loss mask lossMask[t + k].
 */
import type { TrainBatch } from '../../contracts/index.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { copyElements } from '../../gpu/tensor-views.ts';
import { attentionProbs, probsWidth } from '../../kernels/attention-probs.ts';
import type { Eagle3TrainStrategy } from '../strategies/eagle3.ts';

/** What a capture reads from a session (Eagle3TrainingSession.insightParts()). */
export interface DraftInsightParts {
  gpu: Gpu;
  strategy: Eagle3TrainStrategy;
  /** The resident held-out batches, in sample order. */
  batches: readonly TrainBatch<Tensor>[];
  /** Draft → target id offsets: target id = d + d2t[d]. */
  d2t: Int32Array;
  /** The optimizer step the weights are at, recorded in the insight. */
  globalStep: number;
}

export interface DraftInsightOptions {
  /** Predictions kept per position and step (default 5, at most the draft vocabulary). */
  topK?: number;
}

export interface InsightPrediction {
  /** Target-vocabulary id (draft id + d2t). */
  id: number;
  /** Draft softmax probability. */
  p: number;
}

export interface InsightStep {
  /** The ids the draft embeds at this step: ids[t + k], 0 past the end. */
  tokens: number[];
  /** The teacher's (target's argmax) token each row is scored against: tok[t + k]; 0 past the end. */
  targets: number[];
  /** Rows that count for accuracy: lossMask[t + k] = 1. */
  supervised: boolean[];
  /** Top-k draft predictions per row, most probable first. */
  top: InsightPrediction[][];
  /** Draft argmax (ties → lowest draft id) mapped to a target id, per row. */
  argmax: number[];
  /** argmax == target, per row (meaningful where supervised). */
  correct: boolean[];
  /** Σ correct over supervised rows, and their number. */
  correctCount: number;
  supervisedCount: number;
}

/** Plain data (structured-clone safe) for a worker report. */
export interface DraftInsight {
  sampleId: string;
  /** Index in the held-out set. */
  sample: number;
  globalStep: number;
  /** Padded sequence length S of the sample's batch. */
  seq: number;
  /** Real tokens of the sample (Σ attention mask). */
  length: number;
  tttLength: number;
  heads: number;
  /** Key columns per query row: S step-0 keys, then the diagonal keys of steps 1..K−1. */
  width: number;
  /** The sample's ids as step 0 embeds them (already shifted left once), [S]. */
  inputIds: number[];
  attentionMask: number[];
  /** [K, nH, S, W]: P[k][h][i][c] (attention/probs layout). */
  probs: Float32Array;
  steps: InsightStep[];
}

/** Where held-out sample `sample` lives: its batch and row. */
export function locateSample(batches: readonly TrainBatch<Tensor>[], sample: number): { batch: TrainBatch<Tensor>; row: number } {
  const total = batches.reduce((a, b) => a + b.sampleIds.length, 0);
  if (!Number.isInteger(sample) || sample < 0 || sample >= total)
    throw new RangeError(`draft insight: sample must be an integer in [0, ${total}) (the held-out samples), got ${sample}`);
  let rest = sample;
  for (const batch of batches) {
    if (rest < batch.sampleIds.length) return { batch, row: rest };
    rest -= batch.sampleIds.length;
  }
  throw new RangeError(`draft insight: held-out sample ${sample} not found`);
}

/** Captures the insight of held-out sample `sample` with the weights as they are now. */
export async function captureDraftInsight(
  parts: DraftInsightParts,
  sample: number,
  options: DraftInsightOptions = {},
): Promise<DraftInsight> {
  const { gpu, strategy, d2t } = parts;
  const c = strategy.model.config;
  const K = strategy.tttLength;
  const D = c.draftVocabSize;
  const topK = options.topK ?? 5;
  if (!Number.isInteger(topK) || topK < 1 || topK > D)
    throw new RangeError(`draft insight: topK must be an integer in [1, ${D}] (the draft vocabulary), got ${topK}`);
  if (d2t.length !== D) throw new Error(`draft insight: d2t has ${d2t.length} entries, the draft vocabulary ${D}`);
  const { batch, row } = locateSample(parts.batches, sample);
  strategy.validateBatch(batch);
  const t = batch.tensors;
  const [B, S] = t.input_ids.shape;
  const H = c.numHeads;
  const W = probsWidth(S, K);
  const probs = gpu.tensor([K, H, S, W], 'f32', 'insight.probs');
  const logits = gpu.tensor([K, S, D], 'f32', 'insight.logits');
  const tok = gpu.tensor([S], 'i32', 'insight.tok');
  // The sample's rows of the batch's i32 features: ids, attention mask, loss mask.
  const rowsOf = (src: Tensor, label: string) => {
    const dst = gpu.tensor([S], 'i32', label);
    copyElements(gpu, src, row * S, dst, 0, S);
    return dst;
  };
  const small = [rowsOf(t.input_ids, 'insight.ids'), rowsOf(t.attention_mask, 'insight.mask'), rowsOf(t.loss_mask, 'insight.lossMask')];
  try {
    const out = await strategy.evaluate(batch, {
      teacher: async (x) => copyElements(gpu, x.tok, row * S, tok, 0, S),
      attention: (k, x) =>
        attentionProbs(
          gpu,
          { q: x.q, kCache: x.kCache, mask: x.mask, lse: x.lse, probs },
          { batch: B, seq: S, heads: H, kvHeads: c.numKvHeads, headDim: c.headDim, step: k, sample: row, slots: K },
        ),
      // A chunk holds rows [firstRow, firstRow + n) of the batch's B·S rows: copy the sample's rows it has.
      logits: async (k, x, firstRow) => {
        const n = x.numel / D;
        const from = Math.max(row * S, firstRow);
        const to = Math.min((row + 1) * S, firstRow + n);
        if (from < to) copyElements(gpu, x, (from - firstRow) * D, logits, (k * S + from - row * S) * D, (to - from) * D);
      },
    });
    const reads = [gpu.readLater(probs), gpu.readLater(logits), gpu.readLater(tok), ...small.map((s) => gpu.readLater(s))];
    // The batch's loss and metrics are not part of the insight; awaited so a failure surfaces here.
    await Promise.all([out.loss, out.metrics]);
    const [p, z, tk, ids, mask, lossMask] = await Promise.all(reads);
    return describe(
      { parts, sample, batch, row, S, K, H, W, D, topK },
      p as Float32Array,
      z as Float32Array,
      [...tk],
      [...ids],
      [...mask],
      [...lossMask],
    );
  } finally {
    // Reads are queued before the release; any reuse of these buffers is ordered after them.
    gpu.release(probs, logits, tok, ...small);
  }
}

interface Shape {
  parts: DraftInsightParts;
  sample: number;
  batch: TrainBatch<Tensor>;
  row: number;
  S: number;
  K: number;
  H: number;
  W: number;
  D: number;
  topK: number;
}

function describe(
  s: Shape,
  probs: Float32Array,
  logits: Float32Array,
  tok: number[],
  ids: number[],
  mask: number[],
  lossMask: number[],
): DraftInsight {
  const { S, K, D, topK } = s;
  const d2t = s.parts.d2t;
  const steps: InsightStep[] = [];
  for (let k = 0; k < K; k++) {
    const st: InsightStep = {
      tokens: [],
      targets: [],
      supervised: [],
      top: [],
      argmax: [],
      correct: [],
      correctCount: 0,
      supervisedCount: 0,
    };
    for (let i = 0; i < S; i++) {
      const inside = i + k < S;
      st.tokens.push(inside ? ids[i + k] : 0);
      st.targets.push(inside ? tok[i + k] : 0);
      const supervised = inside && lossMask[i + k] === 1;
      st.supervised.push(supervised);
      const z = logits.subarray((k * S + i) * D, (k * S + i + 1) * D);
      const { top, argmax } = predictions(z, topK);
      st.top.push(top.map((d) => ({ id: d.id + d2t[d.id], p: d.p })));
      const predicted = argmax + d2t[argmax];
      st.argmax.push(predicted);
      const correct = predicted === st.targets[i];
      st.correct.push(correct);
      if (supervised) {
        st.supervisedCount++;
        if (correct) st.correctCount++;
      }
    }
    steps.push(st);
  }
  return {
    sampleId: s.batch.sampleIds[s.row],
    sample: s.sample,
    globalStep: s.parts.globalStep,
    seq: S,
    length: mask.reduce((a, m) => a + (m === 1 ? 1 : 0), 0),
    tttLength: K,
    heads: s.H,
    width: s.W,
    inputIds: ids,
    attentionMask: mask,
    probs,
    steps,
  };
}

/** Softmax (float64) of one logits row, its k most probable draft ids (ties → lower id) and its argmax. */
export function predictions(z: ArrayLike<number>, k: number): { top: { id: number; p: number }[]; argmax: number } {
  let argmax = 0;
  for (let d = 1; d < z.length; d++) if (z[d] > z[argmax]) argmax = d;
  const max = z[argmax];
  let sum = 0;
  for (let d = 0; d < z.length; d++) sum += Math.exp(z[d] - max);
  // Partial selection: keep the k best seen so far, in order (k is small).
  const best: number[] = [];
  for (let d = 0; d < z.length; d++) {
    if (best.length === k && z[d] <= z[best[k - 1]]) continue;
    let at = best.length;
    while (at > 0 && z[best[at - 1]] < z[d]) at--;
    best.splice(at, 0, d);
    if (best.length > k) best.pop();
  }
  return { top: best.map((id) => ({ id, p: Math.exp(z[id] - max) / sum })), argmax };
}
