/** Benchmarks of the kernel families beyond matmul, as an explicit list of [family, run]. */
import type { Gpu } from '../src/gpu/gpu.ts';
import { benchAttention } from './kernels/attention.ts';
import { benchEmbedding } from './kernels/embedding.ts';
import { benchLoss } from './kernels/loss.ts';
import { benchOptim } from './kernels/optim.ts';
import { benchRmsnorm } from './kernels/rmsnorm.ts';
import { benchRope } from './kernels/rope.ts';
import { benchSwiglu } from './kernels/swiglu.ts';
import type { BenchRecord } from './record.ts';

export const BENCH_FAMILIES: readonly (readonly [string, (gpu: Gpu) => Promise<BenchRecord[]>])[] = [
  ['embedding', (gpu) => benchEmbedding(gpu)],
  ['rmsnorm', (gpu) => benchRmsnorm(gpu)],
  ['rope', (gpu) => benchRope(gpu)],
  ['swiglu', (gpu) => benchSwiglu(gpu)],
  ['attention', (gpu) => benchAttention(gpu)],
  ['loss', (gpu) => benchLoss(gpu)],
  ['optim', (gpu) => benchOptim(gpu)],
];
