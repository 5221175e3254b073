/**
 * 2-D strided copy between f32 tensors (shaders/copy/strided.wgsl):
 *   dst[dstOffset + r · dstStride + j] = src[srcOffset + r · srcStride + j],  r < rows, j < width.
 * Places column blocks (aux hidden states side by side, vocab slices of a chunked lm_head) and
 * moves row ranges between layouts with different padding (a [B, S] batch into a [B, T] KV cache).
 * Offsets and strides are in elements; both tensors must be single-binding.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkInt, checkNoAlias, checkSinglePart, ELEMENTWISE_CONSTANTS, elementGrid } from './elementwise-common.ts';
import { shaderSource } from './shader-source.ts';

export const COPY_STRIDED_KERNEL: KernelDef = {
  name: 'copy/strided',
  source: shaderSource('copy/strided', ELEMENTWISE_CONSTANTS),
  bindings: ['uniform', 'read', 'write'],
};

export interface StridedCopyArgs {
  rows: number;
  width: number;
  /** Elements between row starts in src; default width. */
  srcStride?: number;
  srcOffset?: number;
  /** Elements between row starts in dst; default width. */
  dstStride?: number;
  dstOffset?: number;
}

/** Encode the copy (no submit). */
export async function copyStrided(gpu: Gpu, src: Tensor, dst: Tensor, args: StridedCopyArgs): Promise<void> {
  const op = 'copyStrided';
  const { rows, width } = args;
  checkInt(`${op}: rows`, rows, 0);
  checkInt(`${op}: width`, width, 1);
  const srcStride = args.srcStride ?? width;
  const dstStride = args.dstStride ?? width;
  const srcOffset = args.srcOffset ?? 0;
  const dstOffset = args.dstOffset ?? 0;
  checkInt(`${op}: srcStride`, srcStride, width);
  checkInt(`${op}: dstStride`, dstStride, width);
  checkInt(`${op}: srcOffset`, srcOffset, 0);
  checkInt(`${op}: dstOffset`, dstOffset, 0);
  if (rows === 0) return;
  checkSinglePart(op, 'src', src, 'f32', srcOffset + (rows - 1) * srcStride + width);
  checkSinglePart(op, 'dst', dst, 'f32', dstOffset + (rows - 1) * dstStride + width);
  checkNoAlias(op, dst, [['src', src]], 'dst');
  const kernel = await gpu.pipelines.get(COPY_STRIDED_KERNEL);
  const uniforms = new UniformWriter().u32(rows).u32(width).u32(srcStride).u32(srcOffset).u32(dstStride).u32(dstOffset).finish();
  gpu.batcher.dispatch(kernel, uniforms, [src.binding(), dst.binding()], elementGrid(gpu, rows * width));
}
