/** Matmul benchmark: GFLOP/s per variant and size (2·M·N·K flops per product). */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { matmul, type MatmulVariant } from '../../src/kernels/matmul.ts';
import { Rng } from '../../src/reference/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

export async function benchMatmul(gpu: Gpu, sizes: readonly number[], variants: readonly MatmulVariant[] = ['naive', 'tiled']): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(5);
  for (const n of sizes) {
    const A = gpu.upload([n * n], 'f32', rng.floats(n * n));
    const B = gpu.upload([n * n], 'f32', rng.floats(n * n));
    const C = gpu.tensor([n * n], 'f32');
    for (const variant of variants) {
      // The naive kernel is only a baseline; skip it where it would take minutes.
      if (variant === 'naive' && n > 1024) continue;
      for (const transB of [false, true]) {
        const seconds = await medianSeconds(gpu, () => matmul(gpu, A, B, C, { M: n, N: n, K: n }, { variant, transB }), n >= 1024 ? 3 : 5);
        out.push({ family: 'matmul', variant: `${variant}${transB ? ' NT' : ' NN'}`, shape: `${n}x${n}x${n}`, ms: seconds * 1e3, gflops: (2 * n ** 3) / seconds / 1e9 });
      }
    }
    gpu.release(A, B, C);
  }
  return out;
}
