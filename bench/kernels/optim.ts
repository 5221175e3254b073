/**
 * Optimizer benchmark: GB/s of the global-norm + clip-coefficient passes (read every gradient once)
 * and of the fused AdamW step (read grad, param, m, v; write param, m, v).
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { adamwStep, globalGradNorm, gradNormWorkspaceSize } from '../../src/kernels/optim.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/** Parameter element counts: a mid draft's MLP projection (1024 x 2816) and a Llama-8B one (4096 x 14336). */
export const OPTIM_BENCH_SIZES: readonly number[] = [1024 * 2816, 4096 * 14336];

export async function benchOptim(gpu: Gpu, sizes: readonly number[] = OPTIM_BENCH_SIZES): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(75);
  for (const n of sizes) {
    const G = gpu.upload([n], 'f32', rng.floats(n, 1e-3), 'grad');
    const P = gpu.upload([n], 'f32', rng.floats(n), 'param');
    const M = gpu.zeros([n], 'f32', 'm');
    const V = gpu.zeros([n], 'f32', 'v');
    const partials = gpu.tensor([gradNormWorkspaceSize([G])], 'f32', 'partials');
    const result = gpu.tensor([2], 'f32', 'result');
    const shape = `${n}`;
    const norm = await medianSeconds(gpu, () => globalGradNorm(gpu, [G], partials, result, { maxNorm: 0.5 }));
    out.push({ family: 'optim', variant: 'grad norm', shape, ms: norm * 1e3, gbps: (n * 4) / norm / 1e9 });
    const opts = { lr: 1e-4, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, step: 1, clip: result };
    const step = await medianSeconds(gpu, () => adamwStep(gpu, P, G, M, V, opts));
    out.push({ family: 'optim', variant: 'adamw (clip fused)', shape, ms: step * 1e3, gbps: (7 * n * 4) / step / 1e9 });
    gpu.release(G, P, M, V, partials, result);
  }
  return out;
}
