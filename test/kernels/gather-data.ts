/** Shared data of the gathered-norm tests (rmsnorm-gather.test.ts, rmsnorm-pair.test.ts). */
import type { Rng } from '../../src/util/random.ts';

/** [sequences, seqLen, vocab, hidden, shift, extra padding of y rows]. */
export const CASES: [number, number, number, number, number, number][] = [
  [1, 5, 7, 3, 0, 0],
  [2, 40, 96, 64, 3, 64], // the fixture draft's input norm, y one half of z [rows, 2H]
  [3, 9, 50, 300, 8, 5], // hidden above 256 (the wide layout's lanes), a shift of all but one token
  [4, 56, 300, 128, 1, 128], // the lab draft's
];
export const EPS = 1e-6;

/** Ids with out-of-vocabulary ones (−1 and vocab, read as zero rows) mixed in. */
export function makeIds(rng: Rng, rows: number, vocab: number): Int32Array {
  const ids = new Int32Array(rows);
  for (let i = 0; i < rows; i++) ids[i] = i % 11 === 5 ? -1 : i % 13 === 7 ? vocab : Math.floor(rng.next() * vocab);
  return ids;
}

/** Table values that f16 holds exactly (multiples of 1/64 in [−4, 4)), so one reference serves both dtypes. */
export function makeTable(rng: Rng, vocab: number, hidden: number): Float32Array {
  return rng.floats(vocab * hidden).map((v) => Math.round(v * 256) / 64);
}
