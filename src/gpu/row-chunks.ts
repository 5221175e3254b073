/**
 * How many rows of a row-wise computation run at a time when its per-row tensors would be too large
 * whole (the draft's head and MLP, model/eagle3/step-head.ts and mlp-chunks.ts; the target's MLP,
 * model/target/layers.ts). One rule, used by the kernels' callers and by the memory plan alike.
 */

/**
 * The most bytes of a chunk's widest tensor: WebGPU's default storage binding size. A larger chunk
 * saves only dispatches (a chunk is already thousands of rows at real widths) and costs memory that
 * grows with the sequence.
 */
export const ROW_CHUNK_BYTES = 128 * 1024 * 1024;

/**
 * Rows per chunk: all `rows` when a [rows, ·] tensor of `rowBytes` per row fits one binding and
 * ROW_CHUNK_BYTES, else as many rows as do (at least one).
 */
export function rowChunkRows(rows: number, rowBytes: number, maxBindingBytes: number): number {
  const fit = Math.floor(Math.min(maxBindingBytes, ROW_CHUNK_BYTES) / rowBytes);
  return Math.max(1, Math.min(rows, fit));
}
