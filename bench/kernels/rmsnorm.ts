/** RMSNorm benchmark: GB/s of forward and backward (each tensor read or written counted once). */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { rmsnormBackward, rmsnormForward } from '../../src/kernels/rmsnorm.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/** [rows, hidden]: the mid EAGLE3 config (4 x 1024 tokens, H 1024) and Llama-8B dims (2048 tokens, H 4096). */
export const RMSNORM_BENCH_SHAPES: readonly [number, number][] = [
  [4096, 1024],
  [2048, 4096],
];

export async function benchRmsnorm(gpu: Gpu, shapes: readonly [number, number][] = RMSNORM_BENCH_SHAPES): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(71);
  for (const [rows, hidden] of shapes) {
    const args = { rows, hidden, eps: 1e-6 };
    const X = gpu.upload([rows, hidden], 'f32', rng.floats(rows * hidden), 'x');
    const W = gpu.upload([hidden], 'f32', rng.floats(hidden), 'w');
    const Y = gpu.tensor([rows, hidden], 'f32', 'y');
    const R = gpu.tensor([rows], 'f32', 'invRms');
    const DY = gpu.upload([rows, hidden], 'f32', rng.floats(rows * hidden), 'dy');
    const DX = gpu.tensor([rows, hidden], 'f32', 'dx');
    const DW = gpu.tensor([hidden], 'f32', 'dw');
    const shape = `${rows}x${hidden}`;
    const act = rows * hidden * 4;
    const fwd = await medianSeconds(gpu, () => rmsnormForward(gpu, X, W, Y, R, args));
    out.push({ family: 'rmsnorm', variant: 'fwd', shape, ms: fwd * 1e3, gbps: (2 * act) / fwd / 1e9 });
    // Backward: the dx pass reads x, dy and writes dx; the dw pass reads x and dy again.
    const bwd = await medianSeconds(gpu, () => rmsnormBackward(gpu, X, W, R, DY, DX, DW, args));
    out.push({ family: 'rmsnorm', variant: 'bwd (dx + dw)', shape, ms: bwd * 1e3, gbps: (5 * act) / bwd / 1e9 });
    gpu.release(X, W, Y, R, DY, DX, DW);
  }
  return out;
}
