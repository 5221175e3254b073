/**
 * EAGLE3 training metrics as sums and counts (docs/eagle3.md §6; shaders/loss/metrics.wgsl),
 * never a mean of means, so they add across steps, micro-batches and ranks:
 *   metricsOut[4·slot + 0] = correct_k = Σ ℓ_k[r] · 1[used[argmax z[r]] == tok_k[r]]
 *   metricsOut[4·slot + 1] = denom_k   = Σ ℓ_k[r]          (ℓ = shifted LOSS mask)
 *   metricsOut[4·slot + 2] = accept_k  = Σ m_k[r] · Σ_v min(p̃_k[r, v], softmax(z[r])_v)
 *   metricsOut[4·slot + 3] = count_k   = Σ m_k[r]          (m = shifted POSITION mask)
 * with the same TTT shift as the loss (row (b, t) reads teacher row (b, t + k), pad beyond S).
 * acc_k = correct/max(denom, 1e-6) and acceptance_rate_k = accept/max(count, 1e-8) are formed only
 * when read (`metricRatios`). Run before an in-place softCrossEntropy, which overwrites the logits.
 * With accumulate, the sums are added to what metricsOut holds. The row layout is chooseRowVariant's
 * (src/kernels/row-variant.ts; `variant` overrides). Only encodes work.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import {
  checkDistinct,
  checkPositiveInt,
  checkRowTensor,
  checkVector,
  checkWindowTensor,
  lossRowGrid,
  lossRowKernels,
  lossRowVariant,
  rowSegments,
  type RowKernelOptions,
  type RowOperand,
  type RowWindow,
} from './loss-rows.ts';
import { reduceColumns } from './loss-reduce.ts';
import { shaderSource } from './shader-source.ts';

export const METRICS_KERNEL: KernelDef = {
  name: 'loss/metrics',
  source: shaderSource('loss/metrics'),
  bindings: ['uniform', 'read', 'read', 'read', 'read', 'read', 'read', 'write'],
};

/** The metric kernel in the three row layouts (src/kernels/row-variant.ts); `wide` is METRICS_KERNEL. */
export const METRICS_KERNELS = lossRowKernels(METRICS_KERNEL);

export const METRIC_FIELDS = ['correct', 'denom', 'acceptSum', 'acceptCount'] as const;

export interface MetricTensors {
  /** Draft logits of step k, f32 [R, D]. */
  logits: Tensor;
  /** Step-0 teacher p̃, f32 [R, D]. */
  pTilde: Tensor;
  /** Step-0 argmax target ids, i32 [R]. */
  tok: Tensor;
  /** Step-0 loss mask, i32 [R]. */
  lossMask: Tensor;
  /** Step-0 position mask, i32 [R]. */
  positionMask: Tensor;
  /** Draft → target ids, i32 [D]. */
  used: Tensor;
  /** f32 [≥ 4·(slot+1)]. */
  metricsOut: Tensor;
}

export interface MetricOptions extends RowKernelOptions {
  rows: number;
  draftVocab: number;
  seqLen: number;
  step: number;
  slot: number;
  accumulate?: boolean;
}

export async function eagle3Metrics(gpu: Gpu, x: MetricTensors, o: MetricOptions): Promise<void> {
  checkMetricSlot(x.metricsOut, o.slot);
  checkDistinct(
    'eagle3Metrics',
    { metricsOut: x.metricsOut },
    { logits: x.logits, pTilde: x.pTilde, tok: x.tok, lossMask: x.lossMask, positionMask: x.positionMask, used: x.used },
  );
  const rowStats = gpu.tensor([o.rows, 4], 'f32', 'metric-row-terms');
  try {
    await eagle3MetricsRows(gpu, { ...x, rowStats }, { ...o, window: { firstRow: 0, rows: o.rows }, teacherWindow: undefined });
    await reduceMetrics(gpu, rowStats, x.metricsOut, o);
  } finally {
    gpu.release(rowStats);
  }
}

/** One row window of a step's metrics (the chunked head, model/eagle3/step-head.ts). */
export interface MetricRowsTensors extends Omit<MetricTensors, 'metricsOut'> {
  /** f32 [R, 4]: the window's rows receive their four terms; reduce with reduceMetrics once every window is done. */
  rowStats: Tensor;
}

export interface MetricRowsOptions extends MetricOptions {
  /** The rows computed: `logits` holds exactly these rows. */
  window: RowWindow;
  /** The teacher rows `pTilde` holds (default all R); it must hold every non-pad row the window reads (r + k). */
  teacherWindow: RowWindow | undefined;
}

/** The metric terms of one window's rows, each computed exactly as by the whole-tensor call. */
export async function eagle3MetricsRows(gpu: Gpu, x: MetricRowsTensors, o: MetricRowsOptions): Promise<void> {
  const op = 'eagle3Metrics';
  const { rows, draftVocab: D, seqLen: S, step: k, window } = o;
  checkPositiveInt(op, 'rows', rows);
  checkPositiveInt(op, 'draftVocab', D);
  checkPositiveInt(op, 'seqLen', S);
  if (rows % S !== 0) throw new Error(`${op}: rows ${rows} is not a multiple of seqLen ${S}`);
  if (!Number.isInteger(k) || k < 0) throw new Error(`${op}: step must be a non-negative integer, got ${k}`);
  const teacher = o.teacherWindow ?? { firstRow: 0, rows };
  checkWindowTensor(op, 'logits', x.logits, 'f32', window, rows, D);
  checkWindowTensor(op, 'pTilde', x.pTilde, 'f32', teacher, rows, D);
  checkRowTensor(op, 'tok', x.tok, 'i32', rows, 1);
  checkRowTensor(op, 'lossMask', x.lossMask, 'i32', rows, 1);
  checkRowTensor(op, 'positionMask', x.positionMask, 'i32', rows, 1);
  checkRowTensor(op, 'rowStats', x.rowStats, 'f32', rows, 4);
  checkVector(op, 'used', x.used, 'i32', D);
  checkDistinct(
    op,
    { rowStats: x.rowStats },
    { logits: x.logits, pTilde: x.pTilde, tok: x.tok, lossMask: x.lossMask, positionMask: x.positionMask, used: x.used },
  );

  const variant = lossRowVariant(gpu, op, D, window.rows, o.variant);
  const kernel = await gpu.pipelines.get(METRICS_KERNELS[variant]);
  const operands: RowOperand[] = [
    { tensor: x.logits, window },
    { tensor: x.pTilde, shift: k, window: teacher },
    { tensor: x.tok, shift: k },
    { tensor: x.lossMask, shift: k },
    { tensor: x.positionMask, shift: k },
    { tensor: x.rowStats },
  ];
  for (const seg of rowSegments(rows, operands, { start: window.firstRow, count: window.rows })) {
    const [z, q, tok, lm, pm, out] = seg.operands;
    const uniforms = new UniformWriter()
      .u32(seg.count)
      .u32(seg.start)
      .u32(D)
      .u32(S)
      .u32(k)
      .u32(z.partRow)
      .u32(q.partRow)
      .u32(tok.partRow)
      .u32(lm.partRow)
      .u32(pm.partRow)
      .u32(out.partRow)
      // One step: its R rows (stepRows = rows, so every row is step 0), no step stride.
      .u32(rows)
      .u32(0)
      .finish();
    gpu.batcher.dispatch(
      kernel,
      uniforms,
      [z.binding, q.binding, tok.binding, lm.binding, pm.binding, x.used.binding(), out.binding],
      lossRowGrid(gpu, seg.count, variant),
    );
  }
}

/** metricsOut[4·slot …] (+)= the column sums of rowStats [R, 4] (fixed order, one workgroup). */
export async function reduceMetrics(
  gpu: Gpu,
  rowStats: Tensor,
  metricsOut: Tensor,
  o: Pick<MetricOptions, 'rows' | 'slot' | 'accumulate'>,
): Promise<void> {
  checkMetricSlot(metricsOut, o.slot);
  await reduceColumns(gpu, rowStats, metricsOut, { rows: o.rows, cols: 4, outOffset: 4 * o.slot, accumulate: o.accumulate ?? false });
}

function checkMetricSlot(metricsOut: Tensor, slot: number): void {
  const op = 'eagle3Metrics';
  if (metricsOut.dtype !== 'f32') throw new Error(`${op}: metricsOut (${metricsOut.label}) must be f32, got ${metricsOut.dtype}`);
  if (!Number.isInteger(slot) || slot < 0 || 4 * (slot + 1) > metricsOut.numel) {
    throw new Error(
      `${op}: slot ${slot} needs ${4 * (slot + 1)} elements, metricsOut (${metricsOut.label} ${fmtShape(metricsOut.shape)}) has ${metricsOut.numel}`,
    );
  }
}

export interface MetricRatios {
  acc: number;
  acceptanceRate: number;
}

/** SpecForge's reported ratios from one slot of read-back sums (guards as in model.py / lk_loss.py). */
export function metricRatios(sums: ArrayLike<number>, slot: number): MetricRatios {
  const [correct, denom, acceptSum, acceptCount] = [0, 1, 2, 3].map((i) => sums[4 * slot + i]);
  return { acc: correct / Math.max(denom, 1e-6), acceptanceRate: acceptSum / Math.max(acceptCount, 1e-8) };
}
