/**
 * What the training forward (forward.ts `eagle3Forward`) leaves for the backward (backward.ts):
 * the unroll's dimensions, the tensors every step shares (positions, K/V caches, teacher, loss and
 * metric sums) and each step's activations, and how they are released. The gradient-free mode
 * (`eagle3EvalForward`) allocates the same unroll tensors and keeps no step.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { elementView } from '../../gpu/tensor-views.ts';
import type { Eagle3Inputs } from './inputs.ts';
import { releaseStepBody, type StepBody } from './step-body.ts';
import { rowLossStride } from './step-head.ts';
import type { TeacherSource } from './teacher-source.ts';

export interface Eagle3Dims {
  batch: number;
  seqLen: number;
  rows: number;
  tttLength: number;
}

/** What one TTT step keeps for the backward. */
export interface StepActivations {
  /** Input hidden of this step: fc output (k = 0) or the previous step's hOut (owned there). */
  hIn: Tensor;
  hOut: Tensor;
  /** The step's other activations; undefined under activation recompute (the backward encodes them again). */
  body: StepBody | undefined;
}

export interface Eagle3ForwardState {
  dims: Eagle3Dims;
  inputs: Eagle3Inputs;
  /** The gradient's scale (the backward multiplies by it); 0 in the gradient-free mode, which has none. */
  lossScale: number;
  /** i32 [B·S] per step: t + k. */
  positions: Tensor[];
  /** RoPE tables of the rotation and its inverse (owned by the parameters' Eagle3Rope). */
  ropeForward: Tensor;
  ropeInverse: Tensor;
  /** fc output, h_in of step 0. */
  hidden0: Tensor;
  /** f32 [L, B, S, nKV, hd]: RoPE'd keys / values of every step. */
  kCache: Tensor;
  vCache: Tensor;
  /** The teacher (whole p and p̃, or built per chunk) with its tok and position mask [R]. */
  teacher: TeacherSource;
  steps: StepActivations[];
  /** Rows per chunk of each step's MLP (mlp-chunks.ts); the backward chunks as the forward did. */
  mlpChunkRows: number;
  /** Rows per chunk of each step's head (step-head.ts), which training runs in the backward. */
  headChunkRows: number;
  /** Training runs every step's head at once at the start of the backward (step-heads-batched.ts). */
  batchedHeads: boolean;
  /** With batched heads, every step's h_out stacked [L·R, H] (one norm reads them all); each step's hOut is a view of it. */
  hOutStack: Tensor | undefined;
  /** Rows per chunk of the fc over f16 features (fc-chunks.ts); its weight gradient chunks as the forward did. */
  fcChunkRows: number;
  /** lossOut and metricsOut, views of one buffer (unrollResults): one clear and one readback a step. */
  results: UnrollResults;
  /** f32 [L + 1]: ploss_0..ploss_{L−1}, then the weighted total. */
  lossOut: Tensor;
  /** f32 [4·L]: per step correct, denom, acceptSum, acceptCount (src/kernels/metrics.ts). */
  metricsOut: Tensor;
  /** Training's `capture`: each step's logits (index k, filled by the backward) and hidden output. */
  captured?: { logits: Promise<Float32Array>[]; hidden: Promise<Float32Array>[] };
}

/** The buffer that holds an unroll's losses and metric sums, and where the sums start in it. */
export interface UnrollResults {
  buffer: Tensor;
  metricsAt: number;
}

/** Where an L-step unroll's metric sums start in its results buffer: past the L + 1 losses, on a binding boundary. */
export function unrollMetricsAt(L: number, alignBytes: number): number {
  return rowLossStride(L + 1, alignBytes);
}

/**
 * The zeroed losses [L + 1] and metric sums [4·L] of an L-step unroll, as views of one buffer of
 * unrollMetricsAt + 4·L elements, so a step clears and reads back both with one command each.
 */
export function unrollResults(gpu: Gpu, L: number, tag: string): { results: UnrollResults; lossOut: Tensor; metricsOut: Tensor } {
  const metricsAt = unrollMetricsAt(L, gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256);
  const buffer = gpu.zeros([metricsAt + 4 * L], 'f32', `${tag}.results`);
  return {
    results: { buffer, metricsAt },
    lossOut: elementView(gpu, buffer, 0, L + 1, `${tag}.losses`),
    metricsOut: elementView(gpu, buffer, metricsAt, 4 * L, `${tag}.metrics`),
  };
}

/** The losses and metric sums of an unroll, read back at once (pending reads, queued now). */
export function readUnrollResults(gpu: Gpu, s: Eagle3ForwardState): { losses: Promise<Float32Array>; metricSums: Promise<Float32Array> } {
  const both = gpu.readLater(s.results.buffer) as Promise<Float32Array>;
  const { metricsAt } = s.results;
  const L = s.dims.tttLength;
  return {
    losses: both.then((a) => a.slice(0, L + 1)),
    metricSums: both.then((a) => a.slice(metricsAt, metricsAt + 4 * L)),
  };
}

/** The tensors of the whole unroll, without the hidden chain (hidden0, each step's activations). */
export function releaseUnrollTensors(gpu: Gpu, s: Eagle3ForwardState): void {
  s.teacher.destroy();
  // lossOut and metricsOut are views of results.buffer.
  gpu.release(...s.positions, s.kCache, s.vCache, s.teacher.tok, s.teacher.positionMask, s.results.buffer);
}

/** Release every tensor the forward allocated (inputs excluded). */
export function releaseForwardState(gpu: Gpu, s: Eagle3ForwardState): void {
  gpu.release(s.hidden0);
  releaseUnrollTensors(gpu, s);
  for (const a of s.steps) {
    // hIn is hidden0 or the previous step's hOut, both released elsewhere; a view of the stack is released with it.
    if (a.body) releaseStepBody(gpu, a.body);
    if (!s.hOutStack) gpu.release(a.hOut);
  }
  if (s.hOutStack) gpu.release(s.hOutStack);
  s.hOutStack = undefined;
  s.steps.length = 0;
}
