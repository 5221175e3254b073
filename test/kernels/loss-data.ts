/** Test data shared by the loss-family suites: chunked tensors, vocabulary mappings, masks, logits. */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { Tensor, type DType, type TensorPart } from '../../src/gpu/tensor.ts';
import type { Rng } from '../../src/util/random.ts';
import { buildVocabMapping } from '../../src/model/eagle3/vocab-mapping.ts';

/** A tensor whose rows live in several buffers, as the Gpu makes for tensors over the binding limit. */
export function chunked(gpu: Gpu, shape: number[], dtype: DType, rowCounts: number[], label: string): Tensor {
  const parts: TensorPart[] = [];
  let rowStart = 0;
  for (const count of rowCounts) {
    const piece = gpu.tensor([count, ...shape.slice(1)], dtype, label);
    parts.push({ ...piece.part, rowStart });
    rowStart += count;
  }
  return new Tensor(shape, dtype, parts, label);
}

/** A random vocabulary mapping: D ascending target ids out of V. */
export function randomMapping(rng: Rng, V: number, D: number): { used: Int32Array; t2d: Int32Array } {
  const counts = new Map<number, number>();
  for (let v = 0; v < V; v++) counts.set(v, rng.int(0, 1000));
  const { used, t2d } = buildVocabMapping(counts, V, D);
  return { used, t2d };
}

export function randomMask(rng: Rng, n: number, pOne: number): Int32Array {
  return Int32Array.from({ length: n }, () => (rng.next() < pOne ? 1 : 0));
}

export function softmaxRows(x: Float32Array, rows: number, width: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let r = 0; r < rows; r++) {
    let max = -Infinity;
    for (let j = 0; j < width; j++) max = Math.max(max, x[r * width + j]);
    let sum = 0;
    for (let j = 0; j < width; j++) sum += Math.exp(x[r * width + j] - max);
    for (let j = 0; j < width; j++) out[r * width + j] = Math.exp(x[r * width + j] - max) / sum;
  }
  return out;
}

/** Logits with planted argmax ties (lowest id must win) and rows whose draft columns are tiny. */
export function teacherLogits(rng: Rng, rows: number, V: number, used: Int32Array): Float32Array {
  const T = rng.floats(rows * V, 4);
  for (let r = 0; r < rows; r++) {
    const base = r * V;
    if (r % 3 === 0) {
      // Tie between a draft and a non-draft id, or two ids, at 9.5.
      const a = rng.int(0, V);
      const b = r % 2 === 0 ? used[rng.int(0, used.length)] : rng.int(0, V);
      T[base + a] = 9.5;
      T[base + b] = 9.5;
    }
    if (r % 5 === 1) {
      // Every draft column ~90 below the max: p must still be a finite, normalised distribution.
      for (const d of used) T[base + d] -= 90;
    }
  }
  return T;
}
