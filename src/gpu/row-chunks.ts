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
 * ROW_CHUNK_BYTES, else the fewest chunks that fit, of equal rows (balancedChunkRows).
 */
export function rowChunkRows(rows: number, rowBytes: number, maxBindingBytes: number): number {
  return balancedChunkRows(rows, Math.floor(Math.min(maxBindingBytes, ROW_CHUNK_BYTES) / rowBytes));
}

/**
 * Rows per chunk when at most `fit` rows fit one: the fewest chunks, each of ⌈rows / chunks⌉ rows, so
 * the last chunk is at most chunks − 1 rows short of the others. Its buffers then fall in the full
 * chunk's size class and the pool hands it the same ones (a short last chunk would hold its own).
 */
export function balancedChunkRows(rows: number, fit: number): number {
  const most = Math.max(1, Math.min(rows, fit));
  return Math.ceil(rows / Math.ceil(rows / most));
}
