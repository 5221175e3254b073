/** Benchmarks of the kernel families beyond matmul, as an explicit list of [family, run]. */
import type { Gpu } from '../src/gpu/gpu.ts';
import { benchLoss } from './kernels/loss.ts';
import type { BenchRecord } from './record.ts';

export const BENCH_FAMILIES: readonly (readonly [string, (gpu: Gpu) => Promise<BenchRecord[]>])[] = [
  ['loss', (gpu) => benchLoss(gpu)],
];
