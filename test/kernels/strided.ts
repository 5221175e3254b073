/**
 * Helpers for tests of row-wise kernels on padded rows: lay dense [rows, width] data out at a row
 * stride with a sentinel in the padding, and read it back checking the padding was not touched.
 */
import { AssertionError } from '../harness/assert.ts';

export const SENTINEL = 12345.5;

/** Dense [rows, width] → rows·stride elements (padding = SENTINEL). */
export function padRows(dense: ArrayLike<number>, rows: number, width: number, stride: number): Float32Array {
  const out = new Float32Array(rows * stride).fill(SENTINEL);
  for (let r = 0; r < rows; r++) for (let j = 0; j < width; j++) out[r * stride + j] = dense[r * width + j];
  return out;
}

/** rows·stride elements → dense [rows, width]; throws if any padding element changed. */
export function unpadRows(padded: ArrayLike<number>, rows: number, width: number, stride: number, what: string): Float32Array {
  const out = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < stride; j++) {
      const v = padded[r * stride + j];
      if (j < width) out[r * width + j] = v;
      else if (v !== SENTINEL) throw new AssertionError(`${what}: padding at row ${r}, column ${j} was overwritten with ${v}`);
    }
  }
  return out;
}
