/**
 * Both gradients of a linear layer y = x · Wᵀ at once:
 *   dx = alpha · dy · W  + betaX · dx        dy [R, out], W [out, in], dx [R, in]
 *   dW = alpha · dyᵀ · x + betaW · dW        x [R, in], dW [out, in]   (betaW 1 by default: accumulate)
 *
 * Every backward of the draft computes these two side by side (lm_head, down, gate/up, o, qkv). On a
 * CPU adapter a small step is bound by the fixed cost of each dispatch (llvmpipe hands every one
 * from its queue thread to its workers and back), so where both products would run
 * matmul/subgroup-vec4 anyway, matmul/subgroup-vec4-pair computes them in one dispatch with the same
 * tiles, so the same bits. Anywhere else it is exactly linearWeightGrad then linearInputGrad, the two
 * calls it replaces: another variant (a GPU, or a CPU adapter without 8-lane subgroups), a width not a
 * multiple of 4, operands split over bindings, an f16 weight, a written buffer shared with another
 * operand, fewer than five storage bindings per stage, or more row tiles than one grid dimension
 * holds (linearGradsPairUnfit names which).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { storageLimitUnfit } from '../gpu/pipeline-cache.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { writtenAlias } from './elementwise-common.ts';
import { checkLinearOperands, linearInputGrad, linearWeightGrad, type LinearShape } from './linear.ts';
import { chooseMatmulVariant, MATMUL_GEOMETRY, matmulDeviceFacts, resolvedMatmulShape, type MatmulShape } from './matmul.ts';
import { shaderSource } from './shader-source.ts';

export const MATMUL_PAIR_KERNEL: KernelDef = {
  name: 'matmul/subgroup-vec4-pair',
  source: shaderSource('matmul/subgroup-vec4-pair', MATMUL_GEOMETRY['subgroup-vec4']),
  bindings: ['uniform', 'read', 'read', 'read', 'write', 'write'],
  requires: ['subgroups'],
};

/** dy [R, out], W [out, in] and x [R, in] read; dx [R, in] and dW [out, in] written. */
export interface LinearGradTensors {
  dy: Tensor;
  w: Tensor;
  x: Tensor;
  dx: Tensor;
  dw: Tensor;
}

export interface LinearGradsOptions {
  alpha?: number;
  /** dx: 0 overwrites (default), 1 adds. */
  betaX?: number;
  /** dW: 1 accumulates (default), 0 overwrites. */
  betaW?: number;
}

/** The two products as the policy sees them when linear.ts issues them (its unsplit path's matmul calls). */
function linearGradShapes(shape: LinearShape): { input: MatmulShape; weight: MatmulShape } {
  const { rows: R, inFeatures: inF, outFeatures: outF } = shape;
  return {
    input: resolvedMatmulShape({ M: R, N: inF, K: outF }, {}, 'f32'),
    weight: resolvedMatmulShape({ M: outF, N: inF, K: R }, { transA: true }, 'f32'),
  };
}

/** Why the pair kernel does not take these operands on this device (so the two matmuls run), or undefined. */
export function linearGradsPairUnfit(gpu: Gpu, shape: LinearShape, t: LinearGradTensors): string | undefined {
  if ([t.dy, t.w, t.x, t.dx, t.dw].some((v) => v.isChunked)) return 'an operand is split into parts';
  if (t.w.dtype !== 'f32') return `W (${t.w.label}) is ${t.w.dtype}`;
  // WebGPU refuses a written buffer bound twice in one dispatch; the two dispatches bind fewer at once.
  const shared = writtenAlias(
    [
      ['dy', t.dy],
      ['W', t.w],
      ['x', t.x],
      ['dx', t.dx],
      ['dW', t.dw],
    ],
    [3, 4],
  );
  if (shared) return shared;
  const storage = storageLimitUnfit(MATMUL_PAIR_KERNEL, gpu.ctx.limits);
  if (storage) return storage;
  const rows = pairRowTiles(shape);
  if (rows.total * rows.input >= 2 ** 32) return `${rows.total} row tiles overflow the shader's u32 interleave`;
  if (rows.total > (gpu.ctx.limits.maxComputeWorkgroupsPerDimension ?? 65535)) return `${rows.total} row tiles exceed one grid dimension`;
  const facts = matmulDeviceFacts(gpu.ctx);
  const shapes = linearGradShapes(shape);
  for (const [which, s] of Object.entries(shapes)) {
    const variant = chooseMatmulVariant(s, gpu.ctx.features, facts);
    if (variant !== 'subgroup-vec4') return `the ${which} gradient runs matmul/${variant}`;
  }
  return undefined;
}

/** dx (+)= dy · W and dW (+)= dyᵀ · x, in one dispatch where linearGradsPairUnfit allows, else two calls. */
export async function linearGrads(gpu: Gpu, t: LinearGradTensors, shape: LinearShape, options: LinearGradsOptions = {}): Promise<void> {
  const alpha = options.alpha ?? 1;
  const betaX = options.betaX ?? 0;
  const betaW = options.betaW ?? 1;
  if (linearGradsPairUnfit(gpu, shape, t) !== undefined) {
    // The weight gradient first, as the draft's backward always ordered them (it reads x, which a
    // caller's dx may overlap: one reason to be here).
    await linearWeightGrad(gpu, t.dy, t.x, t.dw, shape, { alpha, beta: betaW });
    await linearInputGrad(gpu, t.dy, t.w, t.dx, shape, { alpha, beta: betaX });
    return;
  }
  const { rows: R, inFeatures: inF, outFeatures: outF } = shape;
  checkLinearOperands('linearGrads', shape, [
    ['dy', t.dy, R, outF],
    ['W', t.w, outF, inF],
    ['x', t.x, R, inF],
    ['dx', t.dx, R, inF],
    ['dW', t.dw, outF, inF],
  ]);
  const kernel = await gpu.pipelines.get(MATMUL_PAIR_KERNEL);
  const uniforms = new UniformWriter().u32(R).u32(outF).u32(outF).u32(R).u32(inF).f32(alpha).f32(betaX).f32(alpha).f32(betaW).finish();
  gpu.batcher.dispatch(kernel, uniforms, [t.dy.binding(), t.w.binding(), t.x.binding(), t.dx.binding(), t.dw.binding()], pairGrid(shape));
}

/**
 * The pair kernels' grid (matmul/subgroup-vec4-pair and -pair-swiglu): column tiles of `in`, and both
 * problems' row tiles, which the shaders interleave (linearGradsPairUnfit bounds the count).
 */
export function pairGrid(shape: LinearShape): [number, number, number] {
  return [Math.ceil(shape.inFeatures / MATMUL_GEOMETRY['subgroup-vec4'].TILE_N), pairRowTiles(shape).total, 1];
}

/** Row tiles of the input-gradient problem (R rows), and of both problems together. */
function pairRowTiles(shape: LinearShape): { input: number; total: number } {
  const { TILE_M } = MATMUL_GEOMETRY['subgroup-vec4'];
  const input = Math.ceil(shape.rows / TILE_M);
  return { input, total: input + Math.ceil(shape.outFeatures / TILE_M) };
}
