/**
 * A SwiGLU MLP's gate and up projections with the activation, from the stacked weight W = [W_gate;
 * W_up] [2I, H], in one dispatch where the device runs matmul/subgroup-vec4 (matmul/subgroup-vec4-swiglu):
 *   gu = x · Wᵀ (gate | up per row, [R, 2I]),   act = silu(gate) ⊙ up ([R, I])
 * It replaces the product into gu and swiglu/forward-packed: on a CPU adapter a small step is bound by
 * the fixed cost of each dispatch. The backward of the same MLP fuses likewise (swiglu-down-grads.ts).
 *
 * Anywhere else the call is exactly those two commands (linearSwigluUnfit names why): products past
 * the launch-bound size (LINEAR_SWIGLU_MAX_FLOPS), another matmul variant for the product (a GPU, or a
 * CPU adapter without 8-lane subgroups), widths not multiples of 4, an operand split into parts, an f16
 * weight, a written buffer shared with another operand. Same bits either way.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { storageLimitUnfit } from '../gpu/pipeline-cache.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { writtenAlias } from './elementwise-common.ts';
import { checkLinearOperands, linearForward, linearProductUnfit } from './linear.ts';
import { MATMUL_GEOMETRY } from './matmul.ts';
import { shaderSource } from './shader-source.ts';
import { swigluForwardPacked } from './swiglu.ts';

export const LINEAR_SWIGLU_KERNEL: KernelDef = {
  name: 'matmul/subgroup-vec4-swiglu',
  source: shaderSource('matmul/subgroup-vec4-swiglu', MATMUL_GEOMETRY['subgroup-vec4']),
  bindings: ['uniform', 'read', 'read', 'write', 'write'],
  requires: ['subgroups'],
};

/**
 * The largest product (2·R·2I·H FLOPs) the fused kernel takes: it is for launch-bound steps, as the
 * backward's fusion is (SWIGLU_DOWN_FUSED_MAX_FLOPS); bench/RESULTS.md has the measurements.
 */
export const LINEAR_SWIGLU_MAX_FLOPS = 16e6;

/** R rows, H the hidden width (the product's input), I the MLP's intermediate width. */
export interface LinearSwigluShape {
  rows: number;
  hidden: number;
  inter: number;
}

/** x [R, H] and the stacked W [2I, H] read; gu [R, 2I] and act [R, I] written. */
export interface LinearSwigluTensors {
  x: Tensor;
  w: Tensor;
  gu: Tensor;
  act: Tensor;
}

const linearShapeOf = (s: LinearSwigluShape) => ({ rows: s.rows, inFeatures: s.hidden, outFeatures: 2 * s.inter });

/** Why one dispatch does not take these operands on this device (so the two commands run), or undefined. */
export function linearSwigluUnfit(
  gpu: Gpu,
  shape: LinearSwigluShape,
  t: LinearSwigluTensors,
  maxFlops = LINEAR_SWIGLU_MAX_FLOPS,
): string | undefined {
  const flops = 4 * shape.rows * shape.inter * shape.hidden;
  if (flops > maxFlops) return `the product's ${flops} FLOPs are past the launch-bound size the fused kernel is for (${maxFlops})`;
  if ([t.x, t.w, t.gu, t.act].some((v) => v.isChunked)) return 'an operand is split into parts';
  if (t.w.dtype !== 'f32') return `W (${t.w.label}) is ${t.w.dtype}`;
  if (shape.inter % 4 !== 0) return `the intermediate width ${shape.inter} is not a multiple of 4`;
  const shared = writtenAlias(
    [
      ['x', t.x],
      ['W', t.w],
      ['gu', t.gu],
      ['act', t.act],
    ],
    [2, 3],
  );
  if (shared) return shared;
  const storage = storageLimitUnfit(LINEAR_SWIGLU_KERNEL, gpu.ctx.limits);
  if (storage) return storage;
  // Each half of the fused kernel is a subgroup-vec4 tile: the product must run that variant for the bits to match.
  return linearProductUnfit(gpu, linearShapeOf(shape));
}

/**
 * Encode gu = x · Wᵀ and act = silu(gate) ⊙ up (no submit). `maxFlops` is the largest product fused
 * (default LINEAR_SWIGLU_MAX_FLOPS; the benchmark passes Infinity to time the kernel at every size).
 */
export async function linearSwiglu(
  gpu: Gpu,
  t: LinearSwigluTensors,
  shape: LinearSwigluShape,
  maxFlops = LINEAR_SWIGLU_MAX_FLOPS,
): Promise<void> {
  const { rows: R, hidden: H, inter: I } = shape;
  checkLinearOperands('linearSwiglu', linearShapeOf(shape), [
    ['x', t.x, R, H],
    ['W', t.w, 2 * I, H, 'f16'],
    ['gu', t.gu, R, 2 * I],
    ['act', t.act, R, I],
  ]);
  if (linearSwigluUnfit(gpu, shape, t, maxFlops) !== undefined) {
    await linearForward(gpu, t.x, t.w, t.gu, linearShapeOf(shape));
    await swigluForwardPacked(gpu, t.gu, t.act, { rows: R, inter: I });
    return;
  }
  const kernel = await gpu.pipelines.get(LINEAR_SWIGLU_KERNEL);
  const uniforms = new UniformWriter().u32(R).u32(I).u32(H).finish();
  const { TILE_M, TILE_N } = MATMUL_GEOMETRY['subgroup-vec4'];
  const grid: [number, number, number] = [Math.ceil(I / TILE_N), Math.ceil(R / TILE_M), 1];
  gpu.batcher.dispatch(kernel, uniforms, [t.x.binding(), t.w.binding(), t.gu.binding(), t.act.binding()], grid);
}
