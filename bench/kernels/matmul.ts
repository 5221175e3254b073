/**
 * Matmul benchmark: GFLOP/s (2·M·N·K flops per product) of every variant this device can run, at
 * each square size, for the NN and NT (X·Wᵀ) layouts. Variants are measured in the same run so
 * their ratios are comparable on a shared machine. The variant the policy picks for the shape is
 * marked `*` in the record's variant field.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { availableMatmulVariants, chooseMatmulVariant, matmul, matmulDeviceFacts, type MatmulVariant } from '../../src/kernels/matmul.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/** Variants that are only baselines / compile checks on CPU adapters: skip them where they would take minutes. */
const SLOW_ON_LARGE: ReadonlySet<MatmulVariant> = new Set(['naive', 'tiled-f16']);

export async function benchMatmul(gpu: Gpu, sizes: readonly number[], variants?: readonly MatmulVariant[]): Promise<BenchRecord[]> {
  const facts = matmulDeviceFacts(gpu.ctx);
  const list = variants ?? availableMatmulVariants(gpu.ctx.features, facts);
  const out: BenchRecord[] = [];
  const rng = new Rng(5);
  for (const n of sizes) {
    const A = gpu.upload([n * n], 'f32', rng.floats(n * n));
    const B = gpu.upload([n * n], 'f32', rng.floats(n * n));
    const C = gpu.tensor([n * n], 'f32');
    const chosen = chooseMatmulVariant({ M: n, N: n, K: n }, gpu.ctx.features, facts);
    for (const variant of list) {
      if (SLOW_ON_LARGE.has(variant) && n > (facts.fallbackAdapter ? 512 : 1024)) continue;
      for (const transB of [false, true]) {
        const seconds = await medianSeconds(gpu, () => matmul(gpu, A, B, C, { M: n, N: n, K: n }, { variant, transB }), n >= 1024 ? 3 : 5);
        const tag = `${variant}${variant === chosen ? '*' : ''}${transB ? ' NT' : ' NN'}`;
        out.push({ family: 'matmul', variant: tag, shape: `${n}x${n}x${n}`, ms: seconds * 1e3, gflops: (2 * n ** 3) / seconds / 1e9 });
      }
    }
    gpu.release(A, B, C);
  }
  return out;
}
