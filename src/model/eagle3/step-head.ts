/**
 * The head of one TTT step (docs/eagle3.md §6), after its final norm f = norm(h_out): the draft's
 * logits f · W_lmᵀ, the metrics, the soft cross-entropy with its gradient written in place, and (in
 * training) the lm_head backward, dF = dLogits · W_lm and W_lm.grad += dLogitsᵀ · f.
 *
 * All of it is row-wise, so it runs over row chunks of `chunkRows` rows (`headChunkRows`): per chunk
 * the teacher rows it reads (teacher-source.ts), its [n, D] logits, their metrics and loss rows into
 * [R] row buffers, and its lm_head backward; the [R] rows are then summed once, in a fixed order. No
 * [R, D] tensor is allocated when there is more than one chunk. A row's loss, metric terms, gradient
 * and dF are computed exactly as in one chunk; only W_lm.grad is summed chunk by chunk (a different
 * order of the same terms, within 1e-6 relative; test/model/eagle3-head-chunks.test.ts).
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { rowChunkRows } from '../../gpu/row-chunks.ts';
import { copyRows } from '../../gpu/tensor-views.ts';
import { linearForward } from '../../kernels/linear.ts';
import { reduceStepLoss, softCrossEntropyRows } from '../../kernels/loss.ts';
import { reduceTable } from '../../kernels/loss-reduce.ts';
import { eagle3MetricsRows, reduceMetrics } from '../../kernels/metrics.ts';
import { PLOSS_DECAY } from '../../config/eagle3-config.ts';
import type { Eagle3Inputs } from './inputs.ts';
import { lmHeadBackward } from './lm-head.ts';
import type { Eagle3Parameters } from './parameters.ts';
import type { TeacherRows, TeacherSource } from './teacher-source.ts';

/**
 * Rows per chunk of a step's head: all R when the [R, D] f32 logits fit one binding and 128 MiB,
 * else as many rows as do (gpu/row-chunks.ts; the memory plan uses the same rule).
 */
export function headChunkRows(rows: number, draftVocab: number, maxBindingBytes: number): number {
  return rowChunkRows(rows, draftVocab * 4, maxBindingBytes);
}

export interface StepHeadContext {
  gpu: Gpu;
  params: Eagle3Parameters;
  inputs: Eagle3Inputs;
  dims: { seqLen: number; rows: number; tttLength: number };
  teacher: TeacherSource;
  chunkRows: number;
  lossOut: Tensor;
  metricsOut: Tensor;
  /** Training: the gradient's scale; undefined in the gradient-free mode (no gradient, no lm_head backward). */
  lossScale: number | undefined;
  /** Read-only tap on each chunk's logits before the metric and loss kernels read them. */
  onLogits?: (logits: Tensor, firstRow: number) => Promise<void>;
}

/**
 * Step k's head on f [R, H]. In training, dF [R, H] receives dLoss/df (through lm_head). Encodes only;
 * every chunk tensor is released once its last reader is encoded. Given `rowsOut.loss` [R], the rows'
 * losses are left there and the caller reduces them (`reduceStepLoss`): the training backward runs the
 * heads from the last step to the first and sums the weighted total afterwards, in step order. Given
 * `rowsOut.stats` [R, 4], the rows' metric terms are left there likewise (`reduceStepMetrics`).
 */
export async function encodeStepHead(
  ctx: StepHeadContext,
  k: number,
  f: Tensor,
  dF: Tensor | undefined,
  rowsOut: { loss?: Tensor; stats?: Tensor } = {},
): Promise<void> {
  const { gpu, params, teacher, chunkRows } = ctx;
  const { rows: R, tttLength: L } = ctx.dims;
  const { hiddenSize: H, draftVocabSize: D } = params.config;
  const whole = chunkRows >= R;
  const rowLoss = rowsOut.loss ?? gpu.tensor([R], 'f32', 'eagle3.rowLoss');
  const rowStats = rowsOut.stats ?? gpu.tensor([R, 4], 'f32', 'eagle3.rowStats');
  try {
    for (let r0 = 0; r0 < R; r0 += chunkRows) {
      const n = Math.min(chunkRows, R - r0);
      const window = { firstRow: r0, rows: n };
      const fC = whole ? f : gpu.tensor([n, H], 'f32', `eagle3.s${k}.f[${r0}:]`);
      const logits = gpu.tensor([n, D], 'f32', `eagle3.s${k}.logits[${r0}:]`);
      const rows = await teacher.rowsFor(k, r0, n);
      try {
        if (!whole) copyRows(gpu, f, r0, fC, 0, n);
        await linearForward(gpu, fC, params.weights.lmHead.value, logits, { rows: n, inFeatures: H, outFeatures: D });
        await ctx.onLogits?.(logits, r0);
        await encodeHeadRows(ctx, k, logits, rows, window, { loss: rowLoss, stats: rowStats });
        if (dF) {
          // The loss gradient of these rows is final: fold it through lm_head at once (dF [n, H], not [n, D]).
          const dFC = whole ? dF : gpu.tensor([n, H], 'f32', `eagle3.s${k}.dF[${r0}:]`);
          await lmHeadBackward(gpu, params, logits, fC, dFC, n);
          if (!whole) {
            copyRows(gpu, dFC, 0, dF, r0, n);
            gpu.release(dFC);
          }
        }
      } finally {
        teacher.release(rows);
        gpu.release(logits);
        if (!whole) gpu.release(fC);
      }
    }
    if (!rowsOut.stats) await reduceMetrics(gpu, rowStats, ctx.metricsOut, { rows: R, slot: k });
    if (!rowsOut.loss) await reduceStepLoss(gpu, rowLoss, ctx.lossOut, stepLossSlots(k, R, L));
  } finally {
    if (!rowsOut.stats) gpu.release(rowStats);
    if (!rowsOut.loss) gpu.release(rowLoss);
  }
}

/**
 * The metric terms and the soft cross-entropy of rows `window` of step k from their logits [n, D]
 * (with the loss gradient written over them in training), into the step's [R, 4] and [R] row tensors.
 */
async function encodeHeadRows(
  ctx: StepHeadContext,
  k: number,
  logits: Tensor,
  rows: TeacherRows,
  window: { firstRow: number; rows: number },
  out: { loss: Tensor; stats: Tensor },
): Promise<void> {
  const { gpu, params, inputs, teacher } = ctx;
  const common = { rows: ctx.dims.rows, draftVocab: params.config.draftVocabSize, seqLen: ctx.dims.seqLen, step: k };
  const teacherRows = { teacherWindow: rows.window, window };
  // Metrics read the logits, so they go before the in-place loss gradient overwrites them.
  await eagle3MetricsRows(
    gpu,
    {
      logits,
      pTilde: rows.pTilde,
      tok: teacher.tok,
      lossMask: inputs.lossMask,
      positionMask: teacher.positionMask,
      used: params.used,
      rowStats: out.stats,
    },
    { ...common, ...teacherRows, slot: k },
  );
  // The loss does not depend on the grad mode: gradient-free, the same loss without its gradient.
  const train = ctx.lossScale !== undefined;
  const grad = train ? { grad: 'in-place' as const, gradScale: ctx.lossScale! * PLOSS_DECAY ** k } : { grad: 'none' as const };
  await softCrossEntropyRows(
    gpu,
    { logits, p: rows.p, positionMask: teacher.positionMask, rowLoss: out.loss },
    { ...common, ...teacherRows, ...grad, slot: k },
  );
}

/** Where step k's loss goes: lossOut[k], and 0.8ᵏ of it into the total lossOut[L] (the first step writes it). */
export function stepLossSlots(k: number, rows: number, L: number) {
  return { rows, slot: k, total: { slot: L, weight: PLOSS_DECAY ** k, accumulate: k > 0 } };
}

/**
 * The row stride of a [steps, stride] table of the steps' row losses: `rows` rounded up so that each
 * step's rows start on a binding boundary (`alignBytes`, the device's minStorageBufferOffsetAlignment)
 * and can be handed to its head as a tensor of their own.
 */
export function rowLossStride(rows: number, alignBytes: number): number {
  const perBoundary = alignBytes / 4;
  return Math.ceil(rows / perBoundary) * perBoundary;
}

/**
 * The row stride of a [steps, stride] table of `elements` f32 per step (rowLossStride), or 0 where the
 * table would not fit one binding and each step keeps its own tensor. The backward and the memory plan
 * ask this of the row-loss table (elements R) and of the metric-term table (4R).
 */
export function stepTableStride(elements: number, steps: number, alignBytes: number, maxBindingBytes: number): number {
  const stride = rowLossStride(elements, alignBytes);
  return steps * stride * 4 <= maxBindingBytes ? stride : 0;
}

/**
 * What stepLossSlots asks of each of the L steps, for all of them in one dispatch: lossOut[k] =
 * Σ_r table[k, r] / rows and lossOut[L] = Σ_k 0.8ᵏ · Σ_r table[k, r] / rows in step order, from the
 * [L, stride] table of row losses. The same bits as reduceStepLoss step by step (kernels/loss-reduce.ts).
 */
export async function reduceStepLosses(gpu: Gpu, table: Tensor, lossOut: Tensor, rows: number, L: number, stride: number): Promise<void> {
  const weights = Array.from({ length: L }, (_, k) => stepLossSlots(k, rows, L).total.weight / rows);
  await reduceTable(
    gpu,
    table,
    lossOut,
    { rows, cols: L, rowStride: 1, colStride: stride, outOffset: 0, scale: 1 / rows, total: { offset: L, weights } },
    'reduceStepLosses',
  );
}

/**
 * What reduceMetrics asks of each of the L steps, for all of them in one dispatch: metricsOut[4k + j] =
 * Σ_r table[k, 4r + j] from the [L, stride] table of the steps' [R, 4] metric terms (stride: rowLossStride
 * of 4R). The same bits as reduceMetrics step by step (kernels/loss-reduce.ts).
 */
export async function reduceStepMetrics(
  gpu: Gpu,
  table: Tensor,
  metricsOut: Tensor,
  rows: number,
  L: number,
  stride: number,
): Promise<void> {
  await reduceTable(
    gpu,
    table,
    metricsOut,
    { rows, cols: 4, rowStride: 4, colStride: 1, outOffset: 0, groups: { count: L, inStride: stride, outStride: 4 } },
    'reduceStepMetrics',
  );
}

/** Reads back a step's logits chunk by chunk (the training `capture` option) and joins them into [R, D]. */
export function captureLogits(gpu: Gpu, R: number, D: number): { add(logits: Tensor): void; done(): Promise<Float32Array> } {
  const parts: Promise<Float32Array>[] = [];
  return {
    add: (logits) => parts.push(gpu.readLater(logits) as Promise<Float32Array>),
    done: async () => {
      const out = new Float32Array(R * D);
      let at = 0;
      for (const part of await Promise.all(parts)) {
        out.set(part, at);
        at += part.length;
      }
      return out;
    },
  };
}
