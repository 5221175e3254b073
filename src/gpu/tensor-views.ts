/**
 * Small GPU plumbing between kernels, built from buffer views and copies rather than new shaders
 * (the EAGLE3 draft and the target's extend attention use it):
 *   - `elementView`: a tensor aliasing a sub-range of another (the hidden half of the 2H-wide
 *     attention input z, read and written by RMSNorm with a row stride of 2H), possible when the
 *     sub-range starts on a binding-offset boundary (`canViewAt`);
 *   - `copyElements`: a contiguous range copy (a TTT step's K/V slot in and out of the caches);
 *   - `shiftRowsLeft`: SpecForge's per-step `padding(x, left=False)` of the token ids — each
 *     sequence shifted left by k, zero-filled — as B copies and B clears, no kernel.
 */
import type { Gpu } from './gpu.ts';
import { BYTES_PER_ELEMENT, fmtShape, Tensor } from './tensor.ts';

/**
 * A tensor of `numel` elements aliasing `t` from element `offset`. Storage bindings must start at a
 * multiple of the device's minStorageBufferOffsetAlignment (usually 256 bytes); an offset that is
 * not is refused with an error naming the tensor.
 */
export function elementView(gpu: Gpu, t: Tensor, offset: number, numel: number, label: string): Tensor {
  const part = t.part;
  const bytes = BYTES_PER_ELEMENT[t.dtype];
  if (!Number.isInteger(offset) || offset < 0 || offset + numel > t.numel) {
    throw new Error(`${label}: view [${offset}, ${offset + numel}) is outside ${t.label} ${fmtShape(t.shape)}`);
  }
  const align = gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256;
  const byteOffset = part.byteOffset + offset * bytes;
  if (byteOffset % align !== 0) {
    throw new Error(
      `${label}: a view of ${t.label} at element ${offset} starts at byte ${byteOffset}, not a multiple of the device's minStorageBufferOffsetAlignment ${align}` +
        ' (check canViewAt first and copy instead)',
    );
  }
  return new Tensor(
    [numel],
    t.dtype,
    [{ buffer: part.buffer, byteOffset, byteLength: Math.max(4, numel * bytes), rowStart: 0, rowCount: numel }],
    label,
  );
}

/** Whether `elementView(gpu, t, offset, …)` is possible for an f32/i32 tensor starting at a binding boundary. */
export function canViewAt(gpu: Gpu, offset: number): boolean {
  return (offset * 4) % (gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256) === 0;
}

/** Encode dst[dstOffset .. dstOffset+count) = src[srcOffset .. srcOffset+count) (elements; same dtype). */
export function copyElements(gpu: Gpu, src: Tensor, srcOffset: number, dst: Tensor, dstOffset: number, count: number): void {
  if (src.dtype !== dst.dtype) throw new Error(`copyElements: ${src.label} is ${src.dtype} but ${dst.label} is ${dst.dtype}`);
  if (srcOffset < 0 || srcOffset + count > src.numel)
    throw new Error(`copyElements: [${srcOffset}, ${srcOffset + count}) is outside ${src.label} ${fmtShape(src.shape)}`);
  if (dstOffset < 0 || dstOffset + count > dst.numel)
    throw new Error(`copyElements: [${dstOffset}, ${dstOffset + count}) is outside ${dst.label} ${fmtShape(dst.shape)}`);
  if (count === 0) return;
  const bytes = BYTES_PER_ELEMENT[src.dtype];
  gpu.batcher.copyBuffer(
    src.part.buffer,
    src.part.byteOffset + srcOffset * bytes,
    dst.part.buffer,
    dst.part.byteOffset + dstOffset * bytes,
    count * bytes,
  );
}

/**
 * Encode dst[b, t] = src[b, t + k] for t + k < S, else 0, for `batch` sequences of `seqLen` 4-byte
 * elements (ids, masks). `dst` must not alias `src`.
 */
export function shiftRowsLeft(gpu: Gpu, src: Tensor, dst: Tensor, batch: number, seqLen: number, k: number): void {
  if (BYTES_PER_ELEMENT[src.dtype] !== 4) throw new Error(`shiftRowsLeft: ${src.label} must have 4-byte elements, got ${src.dtype}`);
  if (src.numel !== batch * seqLen || dst.numel !== batch * seqLen) {
    throw new Error(
      `shiftRowsLeft: ${src.label} and ${dst.label} must hold ${batch}·${seqLen} elements, got ${src.numel} and ${dst.numel}`,
    );
  }
  if (src.part.buffer === dst.part.buffer) throw new Error(`shiftRowsLeft: ${dst.label} aliases ${src.label}`);
  const kept = Math.max(0, seqLen - k);
  for (let b = 0; b < batch; b++) {
    copyElements(gpu, src, b * seqLen + Math.min(k, seqLen), dst, b * seqLen, kept);
    if (kept < seqLen) gpu.batcher.clearBuffer(dst.part.buffer, dst.part.byteOffset + (b * seqLen + kept) * 4, (seqLen - kept) * 4);
  }
}
