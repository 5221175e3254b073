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
import { BYTES_PER_ELEMENT, fmtShape, partOverlaps, Tensor } from './tensor.ts';

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

/**
 * Encode dst[dstOffset .. dstOffset+count) = src[srcOffset .. srcOffset+count) (elements; same
 * dtype). Either tensor may be split into parts: one buffer copy per overlap. The byte ranges must
 * be whole 4-byte words (queue copies move words): always for f32/i32, for f16 at even offsets and counts.
 */
export function copyElements(gpu: Gpu, src: Tensor, srcOffset: number, dst: Tensor, dstOffset: number, count: number): void {
  if (src.dtype !== dst.dtype) throw new Error(`copyElements: ${src.label} is ${src.dtype} but ${dst.label} is ${dst.dtype}`);
  if (srcOffset < 0 || srcOffset + count > src.numel)
    throw new Error(`copyElements: [${srcOffset}, ${srcOffset + count}) is outside ${src.label} ${fmtShape(src.shape)}`);
  if (dstOffset < 0 || dstOffset + count > dst.numel)
    throw new Error(`copyElements: [${dstOffset}, ${dstOffset + count}) is outside ${dst.label} ${fmtShape(dst.shape)}`);
  if (count === 0) return;
  const overlaps = partOverlaps(src, srcOffset, dst, dstOffset, count);
  if (overlaps.some((o) => o.srcByte % 4 !== 0 || o.dstByte % 4 !== 0 || o.bytes % 4 !== 0))
    throw new Error(
      `copyElements: ${count} ${src.dtype} elements of ${src.label} at ${srcOffset} into ${dst.label} at ${dstOffset} are not whole 4-byte words`,
    );
  for (const o of overlaps) gpu.batcher.copyBuffer(o.src.buffer, o.srcByte, o.dst.buffer, o.dstByte, o.bytes);
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

/**
 * Encode dst rows [dstRow, dstRow + count) = src rows [srcRow, srcRow + count), for tensors of the
 * same dtype and row width (rows of the innermost dimension: [R, W], or [B, S, W] as B·S rows) that
 * may each be split into parts, whatever their splits. `dst` must not alias `src`.
 */
export function copyRows(gpu: Gpu, src: Tensor, srcRow: number, dst: Tensor, dstRow: number, count: number): void {
  const width = innerWidth(src);
  if (innerWidth(dst) !== width)
    throw new Error(`copyRows: rows of ${src.label} ${fmtShape(src.shape)} and ${dst.label} ${fmtShape(dst.shape)} differ in width`);
  if (src.parts.some((s) => dst.parts.some((d) => d.buffer === s.buffer))) throw new Error(`copyRows: ${dst.label} aliases ${src.label}`);
  copyElements(gpu, src, srcRow * width, dst, dstRow * width, count * width);
}

/** Encode rows [row, row + count) of `t` (rows of its innermost dimension) = 0, in whichever parts hold them. */
export function clearRows(gpu: Gpu, t: Tensor, row: number, count: number): void {
  const width = innerWidth(t);
  const bytes = BYTES_PER_ELEMENT[t.dtype];
  if (!Number.isInteger(row) || !Number.isInteger(count) || row < 0 || count < 0 || (row + count) * width > t.numel)
    throw new Error(`clearRows: rows [${row}, ${row + count}) are outside ${t.label} ${fmtShape(t.shape)}`);
  for (const p of t.parts) {
    const start = p.rowStart * t.rowElements;
    const from = Math.max(row * width, start);
    const to = Math.min((row + count) * width, start + p.rowCount * t.rowElements);
    if (from >= to) continue;
    if (((from - start) * bytes) % 4 !== 0 || ((to - from) * bytes) % 4 !== 0)
      throw new Error(`clearRows: rows of ${t.label} ${t.dtype}${fmtShape(t.shape)} are not whole 4-byte words`);
    gpu.batcher.clearBuffer(p.buffer, p.byteOffset + (from - start) * bytes, (to - from) * bytes);
  }
}

/** Elements of one row of the innermost dimension (1 for a vector or scalar). */
function innerWidth(t: Tensor): number {
  return t.shape.length < 2 ? 1 : t.shape[t.shape.length - 1];
}
