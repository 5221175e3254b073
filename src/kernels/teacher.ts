/**
 * EAGLE3 teacher on the GPU (docs/eagle3.md §5; shaders/loss/teacher.wgsl): from full-vocab target
 * logits T [R, V] (R = B·S rows) build, once per batch (TTT step 0),
 *   tok [R] i32          argmax_v T (ties → lowest id)
 *   positionMask [R] i32 t2d[tok] · lossMask
 *   p [R, D] f32         softmax over the draft columns T[r, used] (renormalised)
 *   pTilde [R, D] f32    exp(T[r, used] − logsumexp_v T[r, v]) (not renormalised)
 * Later TTT steps do not rebuild it: the loss and metric kernels read it with a row offset
 * (src/kernels/loss.ts, metrics.ts). `used` = d2t + arange(D) (src/model/eagle3/vocab-mapping.ts),
 * i32, strictly ascending target ids in [0, V); t2d is i32 0/1 [V].
 * T may be chunked (larger than one binding, e.g. 2048 × 128256 f32); the kernel is dispatched per
 * row segment, in the row layout chooseRowVariant picks (src/kernels/row-variant.ts; `variant`
 * overrides). Only encodes work (no submit, no readback).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
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
import { shaderSource } from './shader-source.ts';

export const TEACHER_KERNEL: KernelDef = {
  name: 'loss/teacher',
  source: shaderSource('loss/teacher'),
  bindings: ['uniform', 'read', 'read', 'read', 'read', 'write', 'write', 'write', 'write'],
};

/** The teacher in the three row layouts (src/kernels/row-variant.ts); `wide` is TEACHER_KERNEL. */
export const TEACHER_KERNELS = lossRowKernels(TEACHER_KERNEL);

export interface TeacherTensors {
  /** Full-vocab target logits, f32 [R, V] (or [B, S, V]). */
  logits: Tensor;
  /** i32 0/1 [V]: 1 where the target id is in the draft vocabulary. */
  t2d: Tensor;
  /** i32 [D]: target id of each draft id, ascending. */
  used: Tensor;
  /** i32 [R] loss mask (0/1). */
  lossMask: Tensor;
  /** Outputs. */
  p: Tensor;
  pTilde: Tensor;
  tok: Tensor;
  positionMask: Tensor;
}

export interface TeacherShape {
  rows: number;
  vocab: number;
  draftVocab: number;
}

/**
 * Options of both teachers. With `window`, only those rows are built, and `p` and `pTilde` (and the
 * pruned teacher's `logits`) hold exactly those rows; tok and positionMask stay [R] and get the
 * window's rows. Each row is computed as in the whole build (the chunked head, model/eagle3/step-head.ts).
 */
export interface TeacherOptions extends RowKernelOptions {
  window?: RowWindow;
}

export async function buildTeacher(gpu: Gpu, x: TeacherTensors, shape: TeacherShape, options: TeacherOptions = {}): Promise<void> {
  const op = 'buildTeacher';
  const { rows, vocab, draftVocab } = shape;
  const window = options.window ?? { firstRow: 0, rows };
  checkPositiveInt(op, 'rows', rows);
  checkPositiveInt(op, 'vocab', vocab);
  checkPositiveInt(op, 'draftVocab', draftVocab);
  if (draftVocab > vocab) throw new Error(`${op}: draftVocab ${draftVocab} exceeds vocab ${vocab}`);
  checkRowTensor(op, 'logits', x.logits, 'f32', rows, vocab);
  checkVector(op, 't2d', x.t2d, 'i32', vocab);
  checkVector(op, 'used', x.used, 'i32', draftVocab);
  checkRowTensor(op, 'lossMask', x.lossMask, 'i32', rows, 1);
  checkWindowTensor(op, 'p', x.p, 'f32', window, rows, draftVocab);
  checkWindowTensor(op, 'pTilde', x.pTilde, 'f32', window, rows, draftVocab);
  checkRowTensor(op, 'tok', x.tok, 'i32', rows, 1);
  checkRowTensor(op, 'positionMask', x.positionMask, 'i32', rows, 1);
  checkDistinct(
    op,
    { p: x.p, pTilde: x.pTilde, tok: x.tok, positionMask: x.positionMask },
    { logits: x.logits, t2d: x.t2d, used: x.used, lossMask: x.lossMask },
  );

  const variant = lossRowVariant(gpu, op, vocab, window.rows, options.variant);
  const kernel = await gpu.pipelines.get(TEACHER_KERNELS[variant]);
  const segments = rowSegments(
    rows,
    [
      { tensor: x.logits },
      { tensor: x.lossMask },
      { tensor: x.p, window },
      { tensor: x.pTilde, window },
      { tensor: x.tok },
      { tensor: x.positionMask },
    ],
    { start: window.firstRow, count: window.rows },
  );
  for (const seg of segments) {
    const [T, lm, p, q, tok, pm] = seg.operands;
    const uniforms = new UniformWriter()
      .u32(seg.count)
      .u32(seg.start)
      .u32(vocab)
      .u32(draftVocab)
      .u32(T.partRow)
      .u32(lm.partRow)
      .u32(p.partRow)
      .u32(q.partRow)
      .u32(tok.partRow)
      .u32(pm.partRow)
      .finish();
    gpu.batcher.dispatch(
      kernel,
      uniforms,
      [T.binding, x.t2d.binding(), x.used.binding(), lm.binding, p.binding, q.binding, tok.binding, pm.binding],
      lossRowGrid(gpu, seg.count, variant),
    );
  }
}

/**
 * What a rollout keeps of the target's logits for compact features (shaders/loss/target-stats.wgsl):
 * per row of T [R, V] (R = B·S, or [B, S, V]), lse [R] f32 = logsumexp and tok [R] i32 = argmax (ties →
 * lowest id), pass 1 of the teacher exactly. T may be split into row parts; one dispatch per segment.
 */
export const TARGET_STATS_KERNEL: KernelDef = {
  name: 'loss/target-stats',
  source: shaderSource('loss/target-stats'),
  bindings: ['uniform', 'read', 'write', 'write'],
};
export const TARGET_STATS_KERNELS = lossRowKernels(TARGET_STATS_KERNEL);

export interface TargetStatsTensors {
  logits: Tensor;
  lse: Tensor;
  tok: Tensor;
}

export async function targetStats(
  gpu: Gpu,
  x: TargetStatsTensors,
  shape: { rows: number; vocab: number },
  options: RowKernelOptions = {},
): Promise<void> {
  const op = 'targetStats';
  const { rows, vocab } = shape;
  checkPositiveInt(op, 'rows', rows);
  checkPositiveInt(op, 'vocab', vocab);
  checkRowTensor(op, 'logits', x.logits, 'f32', rows, vocab);
  checkRowTensor(op, 'lse', x.lse, 'f32', rows, 1);
  checkRowTensor(op, 'tok', x.tok, 'i32', rows, 1);
  checkDistinct(op, { lse: x.lse, tok: x.tok }, { logits: x.logits });
  const variant = lossRowVariant(gpu, op, vocab, rows, options.variant);
  const kernel = await gpu.pipelines.get(TARGET_STATS_KERNELS[variant]);
  for (const seg of rowSegments(
    rows,
    [x.logits, x.lse, x.tok].map((tensor) => ({ tensor })),
  )) {
    const [T, l, k] = seg.operands;
    const uniforms = new UniformWriter().u32(seg.count).u32(seg.start).u32(vocab).u32(T.partRow).u32(l.partRow).u32(k.partRow).finish();
    gpu.batcher.dispatch(kernel, uniforms, [T.binding, l.binding, k.binding], lossRowGrid(gpu, seg.count, variant));
  }
}

/**
 * The EAGLE3 teacher from compact features (shaders/loss/teacher-pruned.wgsl): from the target's
 * logits of the D draft tokens Z [R, D] (the trainer projects the target's final hidden state onto the
 * lm_head rows of the draft vocabulary) and the rollout's full-vocabulary lse [R] and tok [R] (argmax
 * target ids), the p, p̃ and position mask buildTeacher makes from the full logits; `tok` itself is
 * the teacher's tok. All may be split into row parts.
 */
export const TEACHER_PRUNED_KERNEL: KernelDef = {
  name: 'loss/teacher-pruned',
  source: shaderSource('loss/teacher-pruned'),
  bindings: ['uniform', 'read', 'read', 'read', 'read', 'read', 'write', 'write', 'write'],
};
export const TEACHER_PRUNED_KERNELS = lossRowKernels(TEACHER_PRUNED_KERNEL);

export interface PrunedTeacherTensors {
  /** The target's logits of the draft tokens, f32 [R, D]. */
  logits: Tensor;
  /** Full-vocabulary logsumexp per row, f32 [R]. */
  lse: Tensor;
  /** Full-vocabulary argmax per row (a target id), i32 [R]. */
  tok: Tensor;
  t2d: Tensor;
  lossMask: Tensor;
  p: Tensor;
  pTilde: Tensor;
  positionMask: Tensor;
}

export async function buildTeacherPruned(
  gpu: Gpu,
  x: PrunedTeacherTensors,
  shape: TeacherShape,
  options: TeacherOptions = {},
): Promise<void> {
  const op = 'buildTeacherPruned';
  const { rows, vocab, draftVocab } = shape;
  const window = options.window ?? { firstRow: 0, rows };
  checkPositiveInt(op, 'rows', rows);
  checkPositiveInt(op, 'vocab', vocab);
  checkPositiveInt(op, 'draftVocab', draftVocab);
  if (draftVocab > vocab) throw new Error(`${op}: draftVocab ${draftVocab} exceeds vocab ${vocab}`);
  checkWindowTensor(op, 'logits', x.logits, 'f32', window, rows, draftVocab);
  checkRowTensor(op, 'lse', x.lse, 'f32', rows, 1);
  checkRowTensor(op, 'tok', x.tok, 'i32', rows, 1);
  checkVector(op, 't2d', x.t2d, 'i32', vocab);
  checkRowTensor(op, 'lossMask', x.lossMask, 'i32', rows, 1);
  checkWindowTensor(op, 'p', x.p, 'f32', window, rows, draftVocab);
  checkWindowTensor(op, 'pTilde', x.pTilde, 'f32', window, rows, draftVocab);
  checkRowTensor(op, 'positionMask', x.positionMask, 'i32', rows, 1);
  checkDistinct(
    op,
    { p: x.p, pTilde: x.pTilde, positionMask: x.positionMask },
    { logits: x.logits, lse: x.lse, tok: x.tok, t2d: x.t2d, lossMask: x.lossMask },
  );
  const variant = lossRowVariant(gpu, op, draftVocab, window.rows, options.variant);
  const kernel = await gpu.pipelines.get(TEACHER_PRUNED_KERNELS[variant]);
  const operands: RowOperand[] = [
    { tensor: x.logits, window },
    { tensor: x.lse },
    { tensor: x.tok },
    { tensor: x.lossMask },
    { tensor: x.p, window },
    { tensor: x.pTilde, window },
    { tensor: x.positionMask },
  ];
  for (const seg of rowSegments(rows, operands, { start: window.firstRow, count: window.rows })) {
    const [Z, l, k, lm, p, q, pm] = seg.operands;
    const uniforms = new UniformWriter()
      .u32(seg.count)
      .u32(seg.start)
      .u32(vocab)
      .u32(draftVocab)
      .u32(Z.partRow)
      .u32(l.partRow)
      .u32(k.partRow)
      .u32(lm.partRow)
      .u32(p.partRow)
      .u32(q.partRow)
      .u32(pm.partRow)
      .finish();
    gpu.batcher.dispatch(
      kernel,
      uniforms,
      [Z.binding, l.binding, k.binding, x.t2d.binding(), lm.binding, p.binding, q.binding, pm.binding],
      lossRowGrid(gpu, seg.count, variant),
    );
  }
}
