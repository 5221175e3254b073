/**
 * Every TTT step's head at once, for training steps whose heads are small (docs/eagle3.md §3). A
 * step's head reads its h_out only, and every h_out is known when the backward starts, so the L
 * heads need not wait for the steps' bodies: one final norm over their stacked h_out writes one
 * f [L·R, H] (each step's 1/rms on a binding boundary of its own), one product
 * gives every step's logits [L·R, D], one dispatch each gives every step's metric terms and loss rows
 * (with the gradient in place; kernels/loss-steps.ts), and one lm_head backward gives dF [L·R, H] and
 * W_lm.grad for all steps.
 *
 * Against one head per step this is five dispatches instead of 5·L (the final norms, two products,
 * the metrics and the loss), for L times the head's logits (at most BATCHED_HEADS_MAX_BYTES). Where each dispatch is
 * small (a fixture step on a CPU adapter) the handoff of a dispatch costs more than its arithmetic;
 * at larger sizes the heads gain nothing from batching and would hold L times the memory, so they
 * keep one head per step (step-head.ts). Each row's logits, loss, metric terms and dF are computed
 * exactly as by its own step's head wherever the lm_head products pick the same matmul variant at R and L·R rows (as at
 * the fixture's shapes: a variant is chosen by shape, kernels/matmul.ts); W_lm.grad sums the same
 * terms in another order (all rows in one product instead of step by step), within 1e-6 relative
 * (test/model/eagle3-heads-batched.test.ts).
 */
import type { Tensor } from '../../gpu/tensor.ts';
import { elementView } from '../../gpu/tensor-views.ts';
import { linearForward } from '../../kernels/linear.ts';
import { LOSS_MAX_STEPS } from '../../kernels/loss.ts';
import { eagle3MetricsSteps, softCrossEntropySteps } from '../../kernels/loss-steps.ts';
import { PLOSS_DECAY } from '../../config/eagle3-config.ts';
import { RMSNORM_ROW_GEOMETRY, rmsnormForward } from '../../kernels/rmsnorm.ts';
import { resolveRowVariant } from '../../kernels/row-variant.ts';
import { lmHeadBackward } from './lm-head.ts';
import { headChunkRows, rowLossStride, stepTableStride, type StepHeadContext } from './step-head.ts';

/**
 * The most bytes of logits [L·R, D] the batched heads hold at once. Batching pays where a dispatch's
 * handoff outweighs its work (the fixture's 2 × 40 rows: 0.12 MB of logits). The lab's 4 × 56 rows
 * (7.3 MB) measured within the step's spread, and the lab main job's heads at 16 MiB raised its GPU
 * peak from 47 to 64 MiB, so larger heads keep one head per step.
 */
export const BATCHED_HEADS_MAX_BYTES = 4 * 1024 * 1024;

/**
 * Each step's rows of f, dF and the logits are views at k·R rows: they must start on a binding
 * boundary on every device, and WebGPU's minStorageBufferOffsetAlignment is at most 256 bytes.
 */
const VIEW_ALIGN_BYTES = 256;

/**
 * Whether a training step of `rows` rows (B·S), L steps, draft vocabulary D and hidden size H runs
 * its heads batched: more than one step and at most LOSS_MAX_STEPS, logits [L·R, D] within
 * BATCHED_HEADS_MAX_BYTES and one binding, one head per step unchunked, each step's rows on a
 * binding boundary, and the steps' row loss and metric tables each one binding. The backward and
 * the memory plan both ask this.
 */
export function batchedHeadsFit(rows: number, steps: number, draftVocab: number, hidden: number, maxBindingBytes: number): boolean {
  const logitBytes = steps * rows * draftVocab * 4;
  return (
    steps > 1 &&
    steps <= LOSS_MAX_STEPS &&
    logitBytes <= Math.min(BATCHED_HEADS_MAX_BYTES, maxBindingBytes) &&
    steps * rows * hidden * 4 <= maxBindingBytes &&
    headChunkRows(rows, draftVocab, maxBindingBytes) >= rows &&
    (rows * draftVocab * 4) % VIEW_ALIGN_BYTES === 0 &&
    (rows * hidden * 4) % VIEW_ALIGN_BYTES === 0 &&
    stepTableStride(rows, steps, VIEW_ALIGN_BYTES, maxBindingBytes) > 0 &&
    stepTableStride(4 * rows, steps, VIEW_ALIGN_BYTES, maxBindingBytes) > 0
  );
}

/**
 * The most rows R′ ≤ `rows` of a step whose heads batch (batchedHeadsFit), or 0 where none do. A run's
 * batches are padded to their own longest sequence, so a step may have fewer rows than the planned
 * B·S, and the predicate is not monotonic in the rows (the cap, the alignment): the memory plan counts
 * the batched heads at R′ whenever a step of at most `rows` rows could run them.
 */
export function batchedHeadRows(rows: number, steps: number, draftVocab: number, hidden: number, maxBindingBytes: number): number {
  const capRows = Math.floor(BATCHED_HEADS_MAX_BYTES / (steps * draftVocab * 4));
  for (let r = Math.min(rows, capRows); r > 0; r--) if (batchedHeadsFit(r, steps, draftVocab, hidden, maxBindingBytes)) return r;
  return 0;
}

/** What the backward reads of the batched heads, step by step. */
export interface BatchedHeads {
  /** Step k's dF [R, H]: a view of the one dF, never released on its own. */
  dF(k: number): Tensor;
  /** Step k's 1/rms of its final norm [R]: a view of the steps' table, never released on its own. */
  invRms(k: number): Tensor;
  /** Releases the one dF and the 1/rms table, after the last step's final-norm backward is encoded. */
  release(): void;
}

/** The steps' tables of row terms (as the backward keeps them): step k's rows from k · stride. */
export interface StepTables {
  /** [L, lossStride]: step k's [R] row losses. */
  loss: Tensor;
  lossStride: number;
  /** [L, statsStride]: step k's [R, 4] metric terms. */
  stats: Tensor;
  statsStride: number;
}

/**
 * Encodes the heads of all L steps (training): `hOuts` is every step's h_out stacked [L·R, H]; the
 * steps' row losses and metric terms go to their rows of `tables`; `onLogits` sees each step's
 * logits before the metrics read them.
 */
export async function encodeBatchedHeads(
  ctx: StepHeadContext,
  hOuts: Tensor,
  tables: StepTables,
  onLogits?: (k: number, logits: Tensor) => void,
): Promise<BatchedHeads> {
  const { gpu, params, inputs, teacher } = ctx;
  const { rows: R, seqLen: S, tttLength: L } = ctx.dims;
  const { hiddenSize: H, draftVocabSize: D, rmsNormEps: eps } = params.config;
  const view = (t: Tensor, k: number, width: number, name: string) =>
    elementView(gpu, t, k * R * width, R * width, `eagle3.s${k}.${name}`, [R, width]);
  const f = gpu.tensor([L * R, H], 'f32', 'eagle3.heads.f');
  const dF = gpu.tensor([L * R, H], 'f32', 'eagle3.heads.dF');
  const logits = gpu.tensor([L * R, D], 'f32', 'eagle3.heads.logits');
  // Each step's 1/rms from a binding boundary, so the step's final-norm backward binds its own.
  const invStride = rowLossStride(R, gpu.ctx.limits.minStorageBufferOffsetAlignment ?? VIEW_ALIGN_BYTES);
  const invRms = gpu.tensor([L, invStride], 'f32', 'eagle3.heads.invRmsFinal');
  try {
    // The L final norms in one dispatch, in the row layout one step's norm takes (the same bits).
    const variant = resolveRowVariant('rmsnormForward', 'rmsnorm', gpu.ctx, { width: H, rows: R }, RMSNORM_ROW_GEOMETRY);
    const norm = { rows: L * R, hidden: H, eps, variant, invRmsBlocks: { rows: R, stride: invStride } };
    await rmsnormForward(gpu, hOuts, params.weights.norm.value, f, invRms, norm);
    await linearForward(gpu, f, params.weights.lmHead.value, logits, { rows: L * R, inFeatures: H, outFeatures: D });
    if (onLogits) for (let k = 0; k < L; k++) onLogits(k, view(logits, k, D, 'logits'));
    // Batched heads run unchunked (batchedHeadsFit), so the teacher is whole: every step reads it shifted.
    const whole = teacher.wholeRows;
    if (!whole) throw new Error('eagle3 batched heads: the teacher is chunked; batchedHeadsFit should have refused these heads');
    const steps = { rows: R, seqLen: S, draftVocab: D, firstStep: 0, steps: L };
    const t = { pTilde: whole.pTilde, tok: teacher.tok, lossMask: inputs.lossMask, positionMask: teacher.positionMask, used: params.used };
    // Metrics read the logits, so they go before the in-place loss gradient overwrites them.
    await eagle3MetricsSteps(gpu, { logits, ...t, rowStats: tables.stats }, { ...steps, tableStride: tables.statsStride });
    // Each step's gradient scale as its own head's (encodeHeadRows, softCrossEntropyRows): weight / (B·S).
    const scale = ctx.lossScale;
    const grad =
      scale === undefined
        ? { grad: 'none' as const }
        : { grad: 'in-place' as const, gradScales: Array.from({ length: L }, (_, k) => (scale * PLOSS_DECAY ** k) / R) };
    await softCrossEntropySteps(
      gpu,
      { logits, p: whole.p, positionMask: teacher.positionMask, rowLoss: tables.loss },
      { ...steps, tableStride: tables.lossStride, ...grad },
    );
    // Every step's loss gradient is in place over its logits: one lm_head backward for all of them.
    await lmHeadBackward(gpu, params, logits, f, dF, L * R);
  } catch (err) {
    gpu.release(dF, invRms);
    throw err;
  } finally {
    gpu.release(f, logits);
  }
  return {
    dF: (k) => view(dF, k, H, 'dF'),
    invRms: (k) => elementView(gpu, invRms, k * invStride, R, `eagle3.s${k}.invRmsFinal`),
    release: () => gpu.release(dF, invRms),
  };
}
