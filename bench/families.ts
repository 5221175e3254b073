/** Benchmarks of the kernel families beyond matmul, as an explicit list of [family, run]. */
import { benchMatmulF16w, benchMatmulGemv } from './kernels/matmul.ts';
import type { Gpu } from '../src/gpu/gpu.ts';
import { benchAttention, benchLanesPrep } from './kernels/attention.ts';
import { benchAttentionProbs } from './kernels/attention-probs.ts';
import { benchCast } from './kernels/cast.ts';
import { benchEmbedding } from './kernels/embedding.ts';
import { benchLinear, LINEAR_CPU_SHAPES } from './kernels/linear.ts';
import { benchLinearGrads } from './kernels/linear-grads.ts';
import { benchLinearResidual } from './kernels/linear-residual.ts';
import { benchLoss, benchStepLosses, benchStepRows } from './kernels/loss.ts';
import { benchOptim } from './kernels/optim.ts';
import { benchRmsnorm } from './kernels/rmsnorm.ts';
import { benchRope } from './kernels/rope.ts';
import { benchSwiglu } from './kernels/swiglu.ts';
import { benchSwigluDownGrads } from './kernels/swiglu-down-grads.ts';
import { benchLinearSwiglu } from './kernels/linear-swiglu.ts';
import type { BenchRecord } from './record.ts';

const CPU_ATTENTION_SHAPE = { batch: 1, seq: 256, heads: 8, kvHeads: 2, headDim: 64 };

export const BENCH_FAMILIES: readonly (readonly [string, (gpu: Gpu) => Promise<BenchRecord[]>])[] = [
  // Decode-step projections (M = 1): N 2048..8192 at K 2048, and the square 4096 x 4096.
  [
    'gemv',
    (gpu) =>
      benchMatmulGemv(gpu, [
        [2048, 2048],
        [8192, 2048],
        [4096, 4096],
      ]),
  ],
  // A 64-token capture of a Qwen3-0.6B-width target: the attention, MLP and a vocabulary slice of its projections.
  [
    'f16w',
    (gpu) =>
      benchMatmulF16w(gpu, [
        [64, 1024, 1024],
        [64, 3072, 1024],
        [64, 1024, 3072],
        [64, 16384, 1024],
      ]),
  ],
  ['embedding', (gpu) => benchEmbedding(gpu)],
  ['rmsnorm', (gpu) => benchRmsnorm(gpu)],
  ['rope', (gpu) => benchRope(gpu)],
  ['swiglu', (gpu) => benchSwiglu(gpu)],
  // SwiGLU's backward fused into the down projection's pair of products, against the two commands it replaces.
  ['swiglu-down-grads', (gpu) => benchSwigluDownGrads(gpu)],
  ['linear-swiglu', (gpu) => benchLinearSwiglu(gpu)],
  // The Llama-8B-shaped attention takes many minutes on a software adapter (pipeline compile
  // included); there it runs at a small shape with the same kernels.
  ['attention', (gpu) => (gpu.ctx.record.isFallbackAdapter ? benchAttention(gpu, CPU_ATTENTION_SHAPE, 3) : benchAttention(gpu))],
  // The lanes backward's prep and dq in one dispatch against two, at the drafts' shapes.
  ['attention-dq-prep', (gpu) => benchLanesPrep(gpu)],
  // One sequence's TTT-step probabilities (the lab's draft insight), at the draft shapes SpecLab trains.
  ['attention-probs', (gpu) => benchAttentionProbs(gpu)],
  ['linear', (gpu) => (gpu.ctx.record.isFallbackAdapter ? benchLinear(gpu, LINEAR_CPU_SHAPES) : benchLinear(gpu))],
  // The draft backward's pairs of gradients: one dispatch against two, at the fixture, lab and mid shapes.
  ['linear-grads', (gpu) => benchLinearGrads(gpu)],
  // The o and down projections with their residual add: one dispatch against a copy and the matmul.
  ['linear-residual', (gpu) => benchLinearResidual(gpu)],
  ['loss', async (gpu) => [...(await benchLoss(gpu)), ...(await benchStepLosses(gpu)), ...(await benchStepRows(gpu))]],
  ['optim', (gpu) => benchOptim(gpu)],
  // Feature-sized casts move ~150 MB per call; a software adapter measures them at a quarter of the rows.
  [
    'cast',
    (gpu) =>
      gpu.ctx.record.isFallbackAdapter
        ? benchCast(gpu, [
            [512, 12288],
            [128, 32000],
          ])
        : benchCast(gpu),
  ],
];
