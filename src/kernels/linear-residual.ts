/**
 * A linear layer and its residual add, y = x · Wᵀ + res, in one dispatch where the device runs
 * matmul/subgroup-vec4 (matmul/subgroup-vec4-residual), instead of a copy of res into y and the
 * matmul with beta = 1. The draft's o and down projections each add onto the hidden state they read;
 * on a CPU adapter a small step is bound by the fixed cost of each command, copies included.
 *
 * Anywhere else the call is exactly that copy and matmul (linearResidualUnfit names why): another
 * variant (a GPU, or a CPU adapter without 8-lane subgroups), a width not a multiple of 4, an
 * operand split into parts, an f16 weight. Same bits either way. y sharing a GPU buffer with an operand
 * is refused on every path (the copy or the product would bind it twice).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { copyRows } from '../gpu/tensor-views.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkNoAlias } from './elementwise-common.ts';
import { checkLinearOperands, linearForward, linearProductUnfit, type LinearShape } from './linear.ts';
import { MATMUL_GEOMETRY } from './matmul.ts';
import { shaderSource } from './shader-source.ts';

export const LINEAR_RESIDUAL_KERNEL: KernelDef = {
  name: 'matmul/subgroup-vec4-residual',
  source: shaderSource('matmul/subgroup-vec4-residual', MATMUL_GEOMETRY['subgroup-vec4']),
  bindings: ['uniform', 'read', 'read', 'read', 'write'],
  requires: ['subgroups'],
};

/** x [R, in], W [out, in] and res [R, out] read; y [R, out] written. */
export interface LinearResidualTensors {
  x: Tensor;
  w: Tensor;
  res: Tensor;
  y: Tensor;
}

/** Why one dispatch does not take these operands on this device (so the copy and the matmul run), or undefined. */
export function linearResidualUnfit(gpu: Gpu, shape: LinearShape, t: LinearResidualTensors): string | undefined {
  if ([t.x, t.w, t.res, t.y].some((v) => v.isChunked)) return 'an operand is split into parts';
  if (t.w.dtype !== 'f32') return `W (${t.w.label}) is ${t.w.dtype}`;
  return linearProductUnfit(gpu, shape);
}

/** Encode y = x · Wᵀ + res (no submit). */
export async function linearForwardResidual(gpu: Gpu, t: LinearResidualTensors, shape: LinearShape): Promise<void> {
  const { rows: R, inFeatures: K, outFeatures: N } = shape;
  checkLinearOperands('linearForwardResidual', shape, [
    ['x', t.x, R, K],
    ['W', t.w, N, K, 'f16'],
    ['res', t.res, R, N],
    ['y', t.y, R, N],
  ]);
  checkNoAlias(
    'linearForwardResidual',
    t.y,
    [
      ['x', t.x],
      ['W', t.w],
      ['res', t.res],
    ],
    'y',
  );
  if (linearResidualUnfit(gpu, shape, t) !== undefined) {
    copyRows(gpu, t.res, 0, t.y, 0, R);
    await linearForward(gpu, t.x, t.w, t.y, shape, { beta: 1 });
    return;
  }
  const kernel = await gpu.pipelines.get(LINEAR_RESIDUAL_KERNEL);
  const uniforms = new UniformWriter().u32(R).u32(N).u32(K).finish();
  const { TILE_M, TILE_N } = MATMUL_GEOMETRY['subgroup-vec4'];
  const grid: [number, number, number] = [Math.ceil(N / TILE_N), Math.ceil(R / TILE_M), 1];
  gpu.batcher.dispatch(kernel, uniforms, [t.x.binding(), t.w.binding(), t.res.binding(), t.y.binding()], grid);
}
