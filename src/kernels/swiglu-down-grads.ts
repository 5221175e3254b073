/**
 * The backward of a SwiGLU MLP's down projection with gate | up packed per row (the draft's stacked
 * projection), in one dispatch where the device runs the pair kernel (matmul/subgroup-vec4-pair-swiglu):
 *   dgu = dgate | dup of act = silu(gate) ⊙ up given dAct = dY · W,   dW += dYᵀ · act
 * with W [H, I] the down projection, dY [R, H], act [R, I] as the forward stored it, gu and dgu
 * [R, 2I]. It replaces the pair of products into a dAct tensor and swiglu/backward-packed: on a CPU
 * adapter a small step is bound by the fixed cost of each dispatch, and dAct never goes through memory.
 *
 * Anywhere else the call is exactly those two commands (swigluDownGradsUnfit names why): products
 * past the launch-bound size (SWIGLU_DOWN_FUSED_MAX_FLOPS), the pair kernel's limits
 * (linearGradsPairUnfit), a written buffer shared with another operand, or fewer than six storage
 * bindings per stage. Same bits either way; an alias the two commands cannot bind either (dgu written
 * over gu) is refused by swigluBackwardPacked's check.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { storageLimitUnfit } from '../gpu/pipeline-cache.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { writtenAlias } from './elementwise-common.ts';
import { checkLinearOperands } from './linear.ts';
import { linearGrads, linearGradsPairUnfit, pairGrid } from './linear-grads.ts';
import { MATMUL_GEOMETRY } from './matmul.ts';
import { shaderSource } from './shader-source.ts';
import { swigluBackwardPacked } from './swiglu.ts';

export const SWIGLU_DOWN_GRADS_KERNEL: KernelDef = {
  name: 'matmul/subgroup-vec4-pair-swiglu',
  source: shaderSource('matmul/subgroup-vec4-pair-swiglu', MATMUL_GEOMETRY['subgroup-vec4']),
  bindings: ['uniform', 'read', 'read', 'read', 'read', 'write', 'write'],
  requires: ['subgroups'],
};

/**
 * The largest pair of products (4·R·I·H FLOPs) the fused kernel takes. It saves a dispatch and dAct's
 * round trip through memory, but does SwiGLU's exponentials inside the product's store: measured on
 * llvmpipe (bench/RESULTS.md, "The down projection's backward and the residual adds in one dispatch"),
 * 1.04–1.42× the two dispatches at the fixture draft's MLP (3.6 MFLOP), 0.72–0.95× at the lab draft's
 * (59 MFLOP) and 0.90–0.93× at the mid config's (1.5 GFLOP). So it runs where the step is launch-bound.
 */
export const SWIGLU_DOWN_FUSED_MAX_FLOPS = 16e6;

/** R rows, I the MLP's intermediate width, H the hidden width (the down projection's output). */
export interface SwigluDownShape {
  rows: number;
  inter: number;
  hidden: number;
}

/** dY [R, H], W [H, I], act [R, I] and gu [R, 2I] read; dgu [R, 2I] and dW [H, I] written. */
export interface SwigluDownGradTensors {
  dy: Tensor;
  w: Tensor;
  act: Tensor;
  gu: Tensor;
  dgu: Tensor;
  dw: Tensor;
}

const linearShapeOf = (s: SwigluDownShape) => ({ rows: s.rows, inFeatures: s.inter, outFeatures: s.hidden });

/** Why one dispatch does not take these operands on this device (so the two commands run), or undefined. */
export function swigluDownGradsUnfit(
  gpu: Gpu,
  shape: SwigluDownShape,
  t: SwigluDownGradTensors,
  maxFlops = SWIGLU_DOWN_FUSED_MAX_FLOPS,
): string | undefined {
  const shared = writtenAlias(
    [
      ['dY', t.dy],
      ['W', t.w],
      ['act', t.act],
      ['gu', t.gu],
      ['dgu', t.dgu],
      ['dW', t.dw],
    ],
    [4, 5],
  );
  if (shared) return shared;
  const flops = 4 * shape.rows * shape.inter * shape.hidden;
  if (flops > maxFlops) return `the products' ${flops} FLOPs are past the launch-bound size the fused kernel is for (${maxFlops})`;
  if (t.gu.isChunked || t.dgu.isChunked) return 'an operand is split into parts';
  const storage = storageLimitUnfit(SWIGLU_DOWN_GRADS_KERNEL, gpu.ctx.limits);
  if (storage) return storage;
  // The pair kernel's limits, with dgu [R, 2I] in dx's place: the check reads operands' buffers and
  // splits, not their shapes, and the products are the pair's (dAct = dY · W, dW += dYᵀ · act).
  return linearGradsPairUnfit(gpu, linearShapeOf(shape), { dy: t.dy, w: t.w, x: t.act, dx: t.dgu, dw: t.dw });
}

/**
 * Encode dgu = SwiGLU's backward of dY · W and dW += dYᵀ · act (no submit). `maxFlops` is the largest
 * pair of products fused (default SWIGLU_DOWN_FUSED_MAX_FLOPS; the benchmark passes Infinity to time
 * the kernel at every size).
 */
export async function swigluDownGrads(
  gpu: Gpu,
  t: SwigluDownGradTensors,
  shape: SwigluDownShape,
  maxFlops = SWIGLU_DOWN_FUSED_MAX_FLOPS,
): Promise<void> {
  const { rows: R, inter: I, hidden: H } = shape;
  checkLinearOperands('swigluDownGrads', linearShapeOf(shape), [
    ['dY', t.dy, R, H],
    ['W', t.w, H, I],
    ['act', t.act, R, I],
    ['gu', t.gu, R, 2 * I],
    ['dgu', t.dgu, R, 2 * I],
    ['dW', t.dw, H, I],
  ]);
  if (swigluDownGradsUnfit(gpu, shape, t, maxFlops) !== undefined) {
    const dAct = gpu.tensor([R, I], 'f32', `${t.gu.label}.dAct`);
    await linearGrads(gpu, { dy: t.dy, w: t.w, x: t.act, dx: dAct, dw: t.dw }, linearShapeOf(shape));
    await swigluBackwardPacked(gpu, t.gu, dAct, t.dgu, { rows: R, inter: I });
    gpu.release(dAct);
    return;
  }
  const kernel = await gpu.pipelines.get(SWIGLU_DOWN_GRADS_KERNEL);
  const uniforms = new UniformWriter().u32(R).u32(H).u32(H).u32(R).u32(I).finish();
  const bindings = [t.dy, t.w, t.act, t.gu, t.dgu, t.dw].map((v) => v.binding());
  gpu.batcher.dispatch(kernel, uniforms, bindings, pairGrid(linearShapeOf(shape)));
}
