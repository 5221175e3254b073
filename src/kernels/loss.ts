/**
 * Cross-entropy losses with fused log-softmax and gradient (shaders/loss/soft-ce.wgsl, hard-ce.wgsl).
 *
 * softCrossEntropy — the EAGLE3 per-step loss (docs/eagle3.md §6):
 *   ploss_k = (1/(B·S)) Σ_r m_k[r] · (−Σ_v p_k[r, v] · log_softmax(z[r])_v)
 *   dlogits = m_k[r] · gradScale/(B·S) · (softmax(z[r]) − p_k[r])
 * where p_k, m_k are the step-0 teacher p and position mask under the TTT shift: row (b, t) of step
 * k reads row (b, t + k), or the pad (p = 1/D, m = 0) when t + k ≥ S — within each sequence, never
 * across batch rows. So the teacher is built once (buildTeacher) and never copied per step.
 * The loss stays on the GPU: lossOut[slot] = ploss_k, and optionally lossOut[total.slot] (+)=
 * total.weight · ploss_k (e.g. weight 0.8^k, accumulate for k > 0, gives SpecForge's total_loss).
 *
 * hardCrossEntropy — standard next-token loss for pretraining a target model: labels i32 [R],
 * negative = ignored; lossOut[slot] = Σ CE / denominator (default: the number of non-negative
 * labels, counted on the GPU) and lossOut[slot + 1] = that count.
 *
 * Gradient modes: 'none' (loss only), 'in-place' (the logits buffer receives the gradient, as
 * SpecForge's fused kernel does — run the metrics first, they read the logits), 'separate' (into
 * dlogits). Reductions are deterministic (loss/reduce: one workgroup, fixed order; no atomics).
 * Each kernel runs in the row layout chooseRowVariant picks for the device (wide / rows /
 * subgroup, src/kernels/row-variant.ts); the `variant` option overrides it. Only encodes work.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import {
  checkDistinct,
  checkPositiveInt,
  checkRowTensor,
  checkWindowTensor,
  lossRowGrid,
  lossRowKernels,
  lossRowVariant,
  placeholder,
  rowSegments,
  type RowKernelOptions,
  type RowOperand,
  type RowWindow,
} from './loss-rows.ts';
import { reduceColumns } from './loss-reduce.ts';
import { shaderSource } from './shader-source.ts';

export type GradMode = 'none' | 'in-place' | 'separate';

/** The most TTT steps one soft-CE dispatch holds (its uniform gradScales: array<vec4<f32>, 4>). */
export const LOSS_MAX_STEPS = 16;

export const GRAD_MODE: Readonly<Record<GradMode, number>> = { none: 0, 'in-place': 1, separate: 2 };

export const SOFT_CE_KERNEL: KernelDef = {
  name: 'loss/soft-ce',
  source: shaderSource('loss/soft-ce'),
  bindings: ['uniform', 'write', 'read', 'read', 'write', 'write'],
};

export const HARD_CE_KERNEL: KernelDef = {
  name: 'loss/hard-ce',
  source: shaderSource('loss/hard-ce'),
  bindings: ['uniform', 'write', 'read', 'write', 'write', 'read'],
};

/** Each kernel in the three row layouts (src/kernels/row-variant.ts); `wide` is the kernel above. */
export const SOFT_CE_KERNELS = lossRowKernels(SOFT_CE_KERNEL);
export const HARD_CE_KERNELS = lossRowKernels(HARD_CE_KERNEL);

export interface SoftCrossEntropyTensors {
  /** Draft logits of step k, f32 [R, D]. */
  logits: Tensor;
  /** Step-0 teacher p, f32 [R, D] (from buildTeacher; shifted by the kernel). */
  p: Tensor;
  /** Step-0 position mask, i32 [R]. */
  positionMask: Tensor;
  /** Gradient output, f32 [R, D]; required for grad 'separate', forbidden otherwise. */
  dlogits?: Tensor;
  /** f32 vector receiving the loss at `slot` (and the weighted total at `total.slot`). */
  lossOut: Tensor;
}

export interface SoftCrossEntropyOptions extends RowKernelOptions {
  rows: number;
  draftVocab: number;
  /** S: rows are B sequences of S positions; the TTT shift stays inside each. */
  seqLen: number;
  /** TTT step k ≥ 0 (teacher row offset). */
  step: number;
  grad: GradMode;
  /** Caller's weight on this step's loss in the gradient, e.g. 0.8^k / accumulation_steps. */
  gradScale?: number;
  /** Mean denominator; default rows (= B·S, SpecForge's normalisation). */
  denominator?: number;
  slot: number;
  total?: { slot: number; weight: number; accumulate: boolean };
}

function checkGradTensors(op: string, grad: GradMode, logits: Tensor, dlogits: Tensor | undefined, rows: number, width: number): void {
  if (!(grad in GRAD_MODE)) throw new Error(`${op}: grad must be 'none', 'in-place' or 'separate', got ${String(grad)}`);
  if (grad === 'separate') {
    if (!dlogits) throw new Error(`${op}: grad 'separate' needs a dlogits tensor`);
    if (dlogits === logits) throw new Error(`${op}: dlogits is the logits tensor; use grad 'in-place'`);
    checkRowTensor(op, 'dlogits', dlogits, 'f32', rows, width);
  } else if (dlogits) {
    throw new Error(`${op}: dlogits was given but grad is '${grad}'; pass grad 'separate' to fill it`);
  }
}

function checkSlot(op: string, lossOut: Tensor, slot: number, width: number, what: string): void {
  if (lossOut.dtype !== 'f32') throw new Error(`${op}: lossOut (${lossOut.label}) must be f32, got ${lossOut.dtype}`);
  if (!Number.isInteger(slot) || slot < 0 || slot + width > lossOut.numel) {
    throw new Error(`${op}: ${what} ${slot} does not fit lossOut (${lossOut.label} ${fmtShape(lossOut.shape)})`);
  }
}

export async function softCrossEntropy(gpu: Gpu, x: SoftCrossEntropyTensors, o: SoftCrossEntropyOptions): Promise<void> {
  const op = 'softCrossEntropy';
  checkSlot(op, x.lossOut, o.slot, 1, 'slot');
  if (o.total) checkSlot(op, x.lossOut, o.total.slot, 1, 'total.slot');
  checkPositiveInt(op, 'rows', o.rows);
  checkDistinct(op, { lossOut: x.lossOut }, { logits: x.logits, dlogits: x.dlogits, p: x.p, positionMask: x.positionMask });
  const rowLoss = gpu.tensor([o.rows], 'f32', 'soft-ce-row-loss');
  try {
    await softCrossEntropyRows(gpu, { ...x, rowLoss }, { ...o, window: { firstRow: 0, rows: o.rows }, teacherWindow: undefined });
    await reduceStepLoss(gpu, rowLoss, x.lossOut, o);
  } finally {
    // Safe before the dispatches run: queue order keeps any later user of the buffer behind them.
    gpu.release(rowLoss);
  }
}

/** One row window of a step's soft cross-entropy (the chunked head, model/eagle3/step-head.ts). */
export interface SoftCrossEntropyRowsTensors extends Omit<SoftCrossEntropyTensors, 'lossOut'> {
  /** f32 [R]: row r of the window receives m · CE[r]; reduce with reduceStepLoss once every window is done. */
  rowLoss: Tensor;
}

export interface SoftCrossEntropyRowsOptions extends SoftCrossEntropyOptions {
  /** The rows computed: `logits` (and `dlogits`) hold exactly these rows. */
  window: RowWindow;
  /** The teacher rows `p` holds (default all R); it must hold every non-pad row the window reads (r + k). */
  teacherWindow: RowWindow | undefined;
}

/**
 * The loss rows of one window: rowLoss[r] = m_k[r] · CE[r] and, per grad mode, the gradient of those
 * rows. Each row is computed exactly as by the whole-tensor call; `reduceStepLoss` then sums the R
 * rows in the same order, so a chunked step has the same loss bits.
 */
export async function softCrossEntropyRows(gpu: Gpu, x: SoftCrossEntropyRowsTensors, o: SoftCrossEntropyRowsOptions): Promise<void> {
  const op = 'softCrossEntropy';
  const { rows, draftVocab: D, seqLen: S, step: k, grad, window } = o;
  checkPositiveInt(op, 'rows', rows);
  checkPositiveInt(op, 'draftVocab', D);
  checkPositiveInt(op, 'seqLen', S);
  if (rows % S !== 0) throw new Error(`${op}: rows ${rows} is not a multiple of seqLen ${S}`);
  if (!Number.isInteger(k) || k < 0) throw new Error(`${op}: step must be a non-negative integer, got ${k}`);
  const denominator = o.denominator ?? rows;
  if (!(denominator > 0)) throw new Error(`${op}: denominator must be positive, got ${denominator}`);
  checkWindowTensor(op, 'logits', x.logits, 'f32', window, rows, D);
  const teacher = o.teacherWindow ?? { firstRow: 0, rows };
  checkWindowTensor(op, 'p', x.p, 'f32', teacher, rows, D);
  checkRowTensor(op, 'positionMask', x.positionMask, 'i32', rows, 1);
  checkRowTensor(op, 'rowLoss', x.rowLoss, 'f32', rows, 1);
  checkGradTensors(op, grad, x.logits, x.dlogits, window.rows, D);
  checkDistinct(op, { logits: x.logits, dlogits: x.dlogits, rowLoss: x.rowLoss }, { p: x.p, positionMask: x.positionMask });

  const variant = lossRowVariant(gpu, op, D, window.rows, o.variant);
  const kernel = await gpu.pipelines.get(SOFT_CE_KERNELS[variant], { GRAD_MODE: GRAD_MODE[grad] });
  const gradOut = x.dlogits ?? placeholder(gpu);
  const operands: RowOperand[] = [
    { tensor: x.logits, window },
    { tensor: x.p, shift: k, window: teacher },
    { tensor: x.positionMask, shift: k },
    { tensor: x.rowLoss },
  ];
  if (x.dlogits) operands.push({ tensor: x.dlogits, window });
  for (const seg of rowSegments(rows, operands, { start: window.firstRow, count: window.rows })) {
    const [z, p, m, l, g] = seg.operands;
    const uniforms = new UniformWriter()
      .u32(seg.count)
      .u32(seg.start)
      .u32(D)
      .u32(S)
      .u32(k)
      .u32(z.partRow)
      .u32(p.partRow)
      .u32(m.partRow)
      .u32(g?.partRow ?? 0)
      .u32(l.partRow)
      // One step: its R rows (stepRows = rows, so every row is step 0), no step stride, one scale.
      .u32(rows)
      .u32(0)
      .f32Array([(o.gradScale ?? 1) / denominator], LOSS_MAX_STEPS)
      .finish();
    gpu.batcher.dispatch(
      kernel,
      uniforms,
      [z.binding, p.binding, m.binding, g?.binding ?? gradOut.binding(), l.binding],
      lossRowGrid(gpu, seg.count, variant),
    );
  }
}

/** lossOut[slot] = Σ rowLoss / denominator, and the weighted total when asked (fixed order, one workgroup). */
export async function reduceStepLoss(
  gpu: Gpu,
  rowLoss: Tensor,
  lossOut: Tensor,
  o: Pick<SoftCrossEntropyOptions, 'rows' | 'denominator' | 'slot' | 'total'>,
): Promise<void> {
  const op = 'softCrossEntropy';
  const denominator = o.denominator ?? o.rows;
  checkSlot(op, lossOut, o.slot, 1, 'slot');
  if (o.total) checkSlot(op, lossOut, o.total.slot, 1, 'total.slot');
  await reduceColumns(gpu, rowLoss, lossOut, { rows: o.rows, cols: 1, outOffset: o.slot, scale: 1 / denominator });
  if (o.total) {
    await reduceColumns(gpu, rowLoss, lossOut, {
      rows: o.rows,
      cols: 1,
      outOffset: o.total.slot,
      scale: o.total.weight / denominator,
      accumulate: o.total.accumulate,
    });
  }
}

export interface HardCrossEntropyTensors {
  /** f32 [R, V] logits (may be chunked). */
  logits: Tensor;
  /** i32 [R] target ids; negative = ignored. */
  labels: Tensor;
  dlogits?: Tensor;
  /** f32: lossOut[slot] = mean loss, lossOut[slot + 1] = number of non-negative labels. */
  lossOut: Tensor;
}

export interface HardCrossEntropyOptions extends RowKernelOptions {
  rows: number;
  vocab: number;
  grad: GradMode;
  gradScale?: number;
  /** Fixed denominator (e.g. the token count of a whole accumulation window); default: the GPU count. */
  denominator?: number;
  slot: number;
}

export async function hardCrossEntropy(gpu: Gpu, x: HardCrossEntropyTensors, o: HardCrossEntropyOptions): Promise<void> {
  const op = 'hardCrossEntropy';
  const { rows, vocab: V, grad } = o;
  checkPositiveInt(op, 'rows', rows);
  checkPositiveInt(op, 'vocab', V);
  if (o.denominator !== undefined && !(o.denominator > 0)) throw new Error(`${op}: denominator must be positive, got ${o.denominator}`);
  checkRowTensor(op, 'logits', x.logits, 'f32', rows, V);
  checkRowTensor(op, 'labels', x.labels, 'i32', rows, 1);
  checkGradTensors(op, grad, x.logits, x.dlogits, rows, V);
  checkSlot(op, x.lossOut, o.slot, 2, 'slot (needs slot and slot + 1)');
  if (x.labels.isChunked) throw new Error(`${op}: labels (${x.labels.label}) must fit one binding`);
  checkDistinct(op, { logits: x.logits, dlogits: x.dlogits, lossOut: x.lossOut }, { labels: x.labels });

  // The label count first: the kernel scales by 1/count unless a denominator is given.
  await reduceColumns(gpu, x.labels, x.lossOut, { rows, cols: 1, outOffset: o.slot + 1, mode: 'count-nonnegative' });
  const rowLoss = gpu.tensor([rows], 'f32', 'hard-ce-row-loss');
  const useCount = o.denominator === undefined;
  const variant = lossRowVariant(gpu, op, V, rows, o.variant);
  const kernel = await gpu.pipelines.get(HARD_CE_KERNELS[variant], { GRAD_MODE: GRAD_MODE[grad], USE_COUNT: useCount });
  const gradOut = x.dlogits ?? placeholder(gpu);
  const operands = [{ tensor: x.logits }, { tensor: x.labels }, { tensor: rowLoss }];
  if (x.dlogits) operands.push({ tensor: x.dlogits });
  for (const seg of rowSegments(rows, operands)) {
    const [lx, lab, l, g] = seg.operands;
    const uniforms = new UniformWriter()
      .u32(seg.count)
      .u32(seg.start)
      .u32(V)
      .u32(lx.partRow)
      .u32(lab.partRow)
      .u32(g?.partRow ?? 0)
      .u32(l.partRow)
      .u32(o.slot + 1)
      .f32(o.gradScale ?? 1)
      .f32(useCount ? 1 : 1 / (o.denominator as number))
      .finish();
    gpu.batcher.dispatch(
      kernel,
      uniforms,
      [lx.binding, lab.binding, g?.binding ?? gradOut.binding(), l.binding, x.lossOut.binding()],
      lossRowGrid(gpu, seg.count, variant),
    );
  }
  await reduceColumns(gpu, rowLoss, x.lossOut, { rows, cols: 1, outOffset: o.slot });
  gpu.release(rowLoss);
}
