/** RoPE benchmark: GB/s of the table rotation (read x, write y; positions and table are small). */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { buildRopeTable, inverseRopeTable, ropeTableForward } from '../../src/kernels/rope-table.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/** [rows, nHeads, headDim]: query heads of the mid EAGLE3 config and of Llama-8B. */
export const ROPE_BENCH_SHAPES: readonly [number, number, number][] = [
  [4096, 16, 64],
  [2048, 32, 128],
];

export async function benchRope(gpu: Gpu, shapes: readonly [number, number, number][] = ROPE_BENCH_SHAPES): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(73);
  for (const [rows, nHeads, headDim] of shapes) {
    const n = rows * nHeads * headDim;
    const table = buildRopeTable({ headDim, ropeTheta: 500000, ropeScaling: { type: 'default' } }, 1024);
    const T = gpu.upload([1024, headDim / 2, 2], 'f32', table, 'table');
    const TI = gpu.upload([1024, headDim / 2, 2], 'f32', inverseRopeTable(table), 'inverse');
    const P = gpu.upload(
      [rows],
      'i32',
      Int32Array.from({ length: rows }, (_, r) => r % 1024),
      'positions',
    );
    const X = gpu.upload([rows, nHeads * headDim], 'f32', rng.floats(n), 'x');
    const Y = gpu.tensor([rows, nHeads * headDim], 'f32', 'y');
    const args = { rows, nHeads, headDim };
    const shape = `${rows}x${nHeads}x${headDim}`;
    const fwd = await medianSeconds(gpu, () => ropeTableForward(gpu, X, P, T, Y, args));
    out.push({ family: 'rope', variant: 'fwd (table)', shape, ms: fwd * 1e3, gbps: (2 * n * 4) / fwd / 1e9 });
    const bwd = await medianSeconds(gpu, () => ropeTableForward(gpu, X, P, TI, Y, args));
    out.push({ family: 'rope', variant: 'bwd (inverse table)', shape, ms: bwd * 1e3, gbps: (2 * n * 4) / bwd / 1e9 });
    gpu.release(T, TI, P, X, Y);
  }
  return out;
}
