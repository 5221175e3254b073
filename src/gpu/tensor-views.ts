/**
 * Small GPU plumbing between kernels, built from buffer views and copies rather than new shaders
 * (the EAGLE3 draft and the target's extend attention use it):
 *   - `elementView`: a tensor aliasing a sub-range of another (the hidden half of the 2H-wide
 *     attention input z, read and written by RMSNorm with a row stride of 2H), possible when the
 *     sub-range starts on a binding-offset boundary (`canViewAt`);
 *   - `viewIfAligned`: such a view where one is possible (a TTT step's K/V slot, written and read
 *     in place), else undefined, for the caller to go through a scratch tensor and a copy;
 *   - `stackedRows`: one [Σ rows, width] view of matrices that lie back to back in one buffer (the
 *     consecutive weights of a parameter arena, such as an MLP's gate and up projections);
 *   - `copyElements`: a contiguous range copy (a K/V slot where it cannot be viewed).
 */
import type { Gpu } from './gpu.ts';
import { BYTES_PER_ELEMENT, fmtShape, partOverlaps, Tensor } from './tensor.ts';

/**
 * A tensor of `numel` elements aliasing `t` from element `offset`, of shape `shape` (default [numel];
 * e.g. a TTT step's [R, 4] metric terms in a table of every step's). Storage bindings must start at a
 * multiple of the device's minStorageBufferOffsetAlignment (usually 256 bytes); an offset that is
 * not is refused with an error naming the tensor.
 */
export function elementView(gpu: Gpu, t: Tensor, offset: number, numel: number, label: string, shape: readonly number[] = [numel]): Tensor {
  const part = t.part;
  if (shape.reduce((a, b) => a * b, 1) !== numel)
    throw new Error(`${label}: a view of ${numel} elements cannot have shape ${fmtShape(shape)}`);
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
    shape,
    t.dtype,
    [{ buffer: part.buffer, byteOffset, byteLength: Math.max(4, numel * bytes), rowStart: 0, rowCount: shape[0] ?? 1 }],
    label,
  );
}

/** Whether `elementView(gpu, t, offset, …)` is possible for an f32/i32 tensor starting at a binding boundary. */
export function canViewAt(gpu: Gpu, offset: number): boolean {
  return (offset * 4) % (gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256) === 0;
}

/**
 * One [Σ rows, width] f32 tensor over `matrices` ([rows_i, width] each) where each starts in the same
 * buffer where the one before it ends; otherwise undefined. The stacked view's rows are the
 * matrices' rows in order, so y = x · [A; B]ᵀ is x · Aᵀ and x · Bᵀ side by side in each row.
 */
export function stackedRows(matrices: readonly Tensor[], label: string): Tensor | undefined {
  const width = matrices[0]?.shape[1];
  let rows = 0;
  for (const [i, m] of matrices.entries()) {
    if (m.dtype !== 'f32' || m.shape.length !== 2 || m.shape[1] !== width || m.parts.length !== 1) return undefined;
    const prev = matrices[i - 1];
    if (prev && (m.part.buffer !== prev.part.buffer || m.part.byteOffset !== prev.part.byteOffset + prev.numel * 4)) return undefined;
    rows += m.shape[0];
  }
  if (width === undefined) return undefined;
  const first = matrices[0].part;
  return new Tensor(
    [rows, width],
    'f32',
    [{ buffer: first.buffer, byteOffset: first.byteOffset, byteLength: rows * width * 4, rowStart: 0, rowCount: rows }],
    label,
  );
}

/**
 * `elementView(gpu, t, offset, numel, label)` where `t` is one buffer and `offset` is on a binding
 * boundary; otherwise undefined.
 */
export function viewIfAligned(gpu: Gpu, t: Tensor, offset: number, numel: number, label: string): Tensor | undefined {
  if (t.parts.length !== 1 || BYTES_PER_ELEMENT[t.dtype] !== 4 || !canViewAt(gpu, t.part.byteOffset / 4 + offset)) return undefined;
  return elementView(gpu, t, offset, numel, label);
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
