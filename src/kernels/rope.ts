/**
 * Rotary position embedding (Hugging Face LLaMA rotate-half convention) on [rows, nHeads, headDim]
 * activations (rows = B·S), with a per-row int32 position and a per-call integer offset (EAGLE3
 * TTT step k rotates row t by position t + k). The backward is the inverse rotation.
 * One shader (shaders/rope/rotate.wgsl) with the override INVERSE serves both directions.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkFinite, checkInt, checkNoAlias, checkSinglePart, checkStride, linearGrid, stridedExtent } from './elementwise-common.ts';
import { shaderSource } from './shader-source.ts';

export const ROPE_KERNEL: KernelDef = { name: 'rope/rotate', source: shaderSource('rope/rotate'), bindings: ['uniform', 'read', 'read', 'write'] };

export interface RopeArgs {
  rows: number;
  nHeads: number;
  /** Even. */
  headDim: number;
  /** rope_theta, e.g. 10000 or 500000. */
  theta: number;
  /** Added to every row's position (TTT step k). Default 0. */
  posOffset?: number;
  /** Elements between consecutive rows of the input; default nHeads · headDim. */
  strideIn?: number;
  /** Elements between consecutive rows of the output; default nHeads · headDim. */
  strideOut?: number;
}

async function rotate(op: string, gpu: Gpu, input: Tensor, positions: Tensor, output: Tensor, args: RopeArgs, inverse: boolean): Promise<void> {
  const { rows, nHeads, headDim, theta } = args;
  checkInt(`${op}: rows`, rows, 0);
  checkInt(`${op}: nHeads`, nHeads);
  checkInt(`${op}: headDim`, headDim, 2);
  if (headDim % 2 !== 0) throw new Error(`${op}: headDim must be even, got ${headDim}`);
  checkFinite(`${op}: theta`, theta);
  if (theta <= 1) throw new Error(`${op}: theta must be > 1, got ${theta}`);
  const posOffset = args.posOffset ?? 0;
  checkInt(`${op}: posOffset`, posOffset, -(2 ** 31));
  if (posOffset >= 2 ** 31) throw new Error(`${op}: posOffset must fit in i32, got ${posOffset}`);
  const width = nHeads * headDim;
  const strideIn = args.strideIn ?? width;
  const strideOut = args.strideOut ?? width;
  checkStride(op, 'strideIn', strideIn, width);
  checkStride(op, 'strideOut', strideOut, width);
  const inName = inverse ? 'dy' : 'x';
  const outName = inverse ? 'dx' : 'y';
  checkSinglePart(op, 'positions', positions, 'i32', rows);
  checkSinglePart(op, inName, input, 'f32', stridedExtent(rows, width, strideIn));
  checkSinglePart(op, outName, output, 'f32', stridedExtent(rows, width, strideOut));
  checkNoAlias(op, output, [[inName, input], ['positions', positions]], outName);
  const kernel = await gpu.pipelines.get(ROPE_KERNEL, { INVERSE: inverse });
  const uniforms = new UniformWriter()
    .u32(rows).u32(nHeads).u32(headDim).u32(strideIn).u32(strideOut)
    .i32(posOffset).f32(Math.log2(theta))
    .finish();
  const pairs = rows * nHeads * (headDim / 2);
  gpu.batcher.dispatch(kernel, uniforms, [positions.binding(), input.binding(), output.binding()], linearGrid(gpu, Math.ceil(pairs / 256)));
}

/** Encode y = RoPE(x) at positions[row] + posOffset (no submit). */
export function ropeForward(gpu: Gpu, x: Tensor, positions: Tensor, y: Tensor, args: RopeArgs): Promise<void> {
  return rotate('ropeForward', gpu, x, positions, y, args, false);
}

/** Encode dx = RoPE⁻¹(dy), the gradient through ropeForward with the same arguments (no submit). */
export function ropeBackward(gpu: Gpu, dy: Tensor, positions: Tensor, dx: Tensor, args: RopeArgs): Promise<void> {
  return rotate('ropeBackward', gpu, dy, positions, dx, args, true);
}
