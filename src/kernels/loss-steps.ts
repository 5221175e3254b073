/**
 * The metric terms and the soft cross-entropy of several TTT steps in one dispatch each (the batched
 * heads, model/eagle3/step-heads-batched.ts). Steps k0 … k0 + n − 1 have their logits stacked as one
 * [n·R, D] tensor; row j of it is row r = j mod R of step k0 + j / R, which reads the step-0 teacher,
 * tok and masks under its own shift k0 + j / R, and writes its row terms to its step's rows of a
 * [n, stride] table (as the backward keeps them). The kernels are those of metrics.ts and loss.ts
 * (shaders/include/metrics-row.wgsl, soft-ce-row.wgsl: one row body), so every row is the same bits as
 * in a dispatch of its step alone, provided the same row layout runs: it is chosen for R rows, as one
 * step's call chooses it. Every operand must be one binding. Only encodes work.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { GRAD_MODE, LOSS_MAX_STEPS, SOFT_CE_KERNELS } from './loss.ts';
import {
  checkDistinct,
  checkPositiveInt,
  checkRowTensor,
  checkVector,
  lossRowGrid,
  lossRowVariant,
  placeholder,
  type RowKernelOptions,
} from './loss-rows.ts';
import { METRICS_KERNELS, type MetricTensors } from './metrics.ts';

/** The steps' shape: R rows per step (B sequences of S), n steps from k0, draft vocabulary D. */
export interface StepRowsShape extends RowKernelOptions {
  rows: number;
  seqLen: number;
  draftVocab: number;
  firstStep: number;
  steps: number;
  /** Elements between two steps' rows in the output table (a multiple of the row width, ≥ R · width). */
  tableStride: number;
}

function checkSteps(op: string, o: StepRowsShape, width: number, table: Tensor): void {
  checkPositiveInt(op, 'rows', o.rows);
  checkPositiveInt(op, 'seqLen', o.seqLen);
  checkPositiveInt(op, 'draftVocab', o.draftVocab);
  checkPositiveInt(op, 'steps', o.steps);
  if (o.rows % o.seqLen !== 0) throw new Error(`${op}: rows ${o.rows} is not a multiple of seqLen ${o.seqLen}`);
  if (!Number.isInteger(o.firstStep) || o.firstStep < 0)
    throw new Error(`${op}: firstStep must be a non-negative integer, got ${o.firstStep}`);
  if (!Number.isInteger(o.tableStride) || o.tableStride < o.rows * width)
    throw new Error(`${op}: tableStride ${o.tableStride} is below one step's ${o.rows} × ${width} elements`);
  if (table.dtype !== 'f32' || table.isChunked || table.numel < (o.steps - 1) * o.tableStride + o.rows * width)
    throw new Error(`${op}: table (${table.label}) must be one f32 binding of at least ${o.steps} rows of stride ${o.tableStride}`);
}

/** The steps' uniforms up to the step fields (count, rowStart, D, S, k0, then every part at row 0). */
function stepUniforms(o: StepRowsShape, parts: number): UniformWriter {
  const u = new UniformWriter()
    .u32(o.steps * o.rows)
    .u32(0)
    .u32(o.draftVocab)
    .u32(o.seqLen)
    .u32(o.firstStep);
  for (let i = 0; i < parts; i++) u.u32(0);
  return u.u32(o.rows).u32(o.tableStride);
}

/** The teacher's and the masks' tensors as one step's metrics read them (metrics.ts MetricTensors). */
export interface MetricStepsTensors extends Omit<MetricTensors, 'logits' | 'metricsOut'> {
  /** Stacked logits of the steps, f32 [n·R, D]. */
  logits: Tensor;
  /** f32 [n, tableStride]: step s's [R, 4] terms from element s · tableStride. */
  rowStats: Tensor;
}

/** The metric terms of n steps' rows in one dispatch (metrics.ts eagle3MetricsRows, step by step). */
export async function eagle3MetricsSteps(gpu: Gpu, x: MetricStepsTensors, o: StepRowsShape): Promise<void> {
  const op = 'eagle3MetricsSteps';
  checkSteps(op, o, 4, x.rowStats);
  const { rows: R, draftVocab: D } = o;
  checkRowTensor(op, 'logits', x.logits, 'f32', o.steps * R, D);
  checkRowTensor(op, 'pTilde', x.pTilde, 'f32', R, D);
  for (const [name, t] of [
    ['tok', x.tok],
    ['lossMask', x.lossMask],
    ['positionMask', x.positionMask],
  ] as const)
    checkRowTensor(op, name, t, 'i32', R, 1);
  checkVector(op, 'used', x.used, 'i32', D);
  checkDistinct(
    op,
    { rowStats: x.rowStats },
    { logits: x.logits, pTilde: x.pTilde, tok: x.tok, lossMask: x.lossMask, positionMask: x.positionMask, used: x.used },
  );
  const variant = lossRowVariant(gpu, op, D, R, o.variant);
  const kernel = await gpu.pipelines.get(METRICS_KERNELS[variant]);
  const operands = [x.logits, x.pTilde, x.tok, x.lossMask, x.positionMask, x.used, x.rowStats].map((t) => t.binding());
  gpu.batcher.dispatch(kernel, stepUniforms(o, 6).finish(), operands, lossRowGrid(gpu, o.steps * R, variant));
}

export interface SoftCrossEntropyStepsTensors {
  /** Stacked logits of the steps, f32 [n·R, D]; receives the gradient in place with grad 'in-place'. */
  logits: Tensor;
  /** Step-0 teacher p [R, D] and position mask [R]. */
  p: Tensor;
  positionMask: Tensor;
  /** f32 [n, tableStride]: step s's [R] row losses from element s · tableStride. */
  rowLoss: Tensor;
}

export interface SoftCrossEntropyStepsOptions extends StepRowsShape {
  grad: 'none' | 'in-place';
  /** With grad 'in-place': step s's gradient scale, weight / (B·S) (softCrossEntropyRows' gradScale / denominator). */
  gradScales?: readonly number[];
}

/** The soft cross-entropy rows of n steps in one dispatch (loss.ts softCrossEntropyRows, step by step). */
export async function softCrossEntropySteps(gpu: Gpu, x: SoftCrossEntropyStepsTensors, o: SoftCrossEntropyStepsOptions): Promise<void> {
  const op = 'softCrossEntropySteps';
  if (o.steps > LOSS_MAX_STEPS) throw new Error(`${op}: steps ${o.steps} exceeds the ${LOSS_MAX_STEPS} one dispatch holds`);
  checkSteps(op, o, 1, x.rowLoss);
  const { rows: R, draftVocab: D } = o;
  if (o.grad !== 'none' && o.grad !== 'in-place') throw new Error(`${op}: grad must be 'none' or 'in-place', got ${String(o.grad)}`);
  const scales = o.gradScales ?? [];
  if (o.grad === 'in-place' && (scales.length !== o.steps || !scales.every(Number.isFinite)))
    throw new Error(`${op}: grad 'in-place' needs one finite gradScales entry per step (${o.steps}), got [${scales.join(', ')}]`);
  checkRowTensor(op, 'logits', x.logits, 'f32', o.steps * R, D);
  checkRowTensor(op, 'p', x.p, 'f32', R, D);
  checkRowTensor(op, 'positionMask', x.positionMask, 'i32', R, 1);
  checkDistinct(op, { logits: x.logits, rowLoss: x.rowLoss }, { p: x.p, positionMask: x.positionMask });
  const variant = lossRowVariant(gpu, op, D, R, o.variant);
  const kernel = await gpu.pipelines.get(SOFT_CE_KERNELS[variant], { GRAD_MODE: GRAD_MODE[o.grad] });
  const uniforms = stepUniforms(o, 5).f32Array(scales, LOSS_MAX_STEPS).finish();
  // The gradient binding (4) is unused in both modes.
  const operands = [x.logits, x.p, x.positionMask, placeholder(gpu), x.rowLoss].map((t) => t.binding());
  gpu.batcher.dispatch(kernel, uniforms, operands, lossRowGrid(gpu, o.steps * R, variant));
}
