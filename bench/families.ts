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

const CPU_ATTENTION_SHAPE = { batch: 1, seq: 256, heads: 8, kvHeads: 2, headDim: 64 };

export const BENCH_FAMILIES: readonly (readonly [string, (gpu: Gpu) => Promise<BenchRecord[]>])[] = [
  ['embedding', (gpu) => benchEmbedding(gpu)],
  ['rmsnorm', (gpu) => benchRmsnorm(gpu)],
  ['rope', (gpu) => benchRope(gpu)],
  ['swiglu', (gpu) => benchSwiglu(gpu)],
  // The Llama-8B-shaped attention takes many minutes on a software adapter (pipeline compile
  // included); there it runs at a small shape with the same kernels.
  ['attention', (gpu) => (gpu.ctx.record.isFallbackAdapter ? benchAttention(gpu, CPU_ATTENTION_SHAPE, 3) : benchAttention(gpu))],
  ['loss', (gpu) => benchLoss(gpu)],
  ['optim', (gpu) => benchOptim(gpu)],
];
