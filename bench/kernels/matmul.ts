/**
 * Matmul benchmark: GFLOP/s (2·M·N·K flops per product) of every variant this device can run, at
 * each square size, for the NN and NT (X·Wᵀ) layouts. Variants are measured interleaved, rep by
 * rep, so their ratios are comparable on a shared machine. The variant the policy picks for the shape is
 * marked `*` in the record's variant field.
 *
 * `benchMatmulGemv`: single-row products (M = 1, a decode step's X·Wᵀ) at N x K weight shapes,
 * naive vs gemv vs gemv-vec4 vs gemv-subgroup with f32 and with f16 weights, interleaved rep by rep so that their
 * ratios hold on a loaded machine (`npm run bench -- --only gemv`).
 *
 * `benchMatmulF16w`: M > 1 rows against f16 weights (a prefill or capture), every f16-weight variant.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import {
  availableMatmulVariants,
  chooseMatmulVariant,
  matmul,
  matmulDeviceFacts,
  matmulShapeUnfit,
  matmulVariantUnsupported,
  MATMUL_F16W_VARIANTS,
  type MatmulVariant,
} from '../../src/kernels/matmul.ts';
import { f32ToF16Bits } from '../../src/formats/f16-bits.ts';
import { Rng } from '../../src/util/random.ts';
import type { BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';

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
    const cases = list
      .filter((variant) => !(SLOW_ON_LARGE.has(variant) && n > (facts.fallbackAdapter ? 512 : 1024)))
      .flatMap((variant) => [false, true].map((transB) => ({ variant, transB })));
    const tag = (c: (typeof cases)[number]) => `${c.variant}${c.variant === chosen ? '*' : ''}${c.transB ? ' NT' : ' NN'}`;
    // Interleaved rep by rep, so that the variants' ratios hold on a machine whose load drifts.
    const med = await interleavedMedians(
      gpu,
      new Map(cases.map((c) => [tag(c), () => matmul(gpu, A, B, C, { M: n, N: n, K: n }, c)])),
      n >= 1024 ? 3 : 5,
    );
    for (const [variant, seconds] of med) {
      out.push({ family: 'matmul', variant, shape: `${n}x${n}x${n}`, ms: seconds * 1e3, gflops: (2 * n ** 3) / seconds / 1e9 });
    }
    gpu.release(A, B, C);
  }
  return out;
}

/** M = 1 against [N, K]ᵀ weights: naive vs gemv, f32 and f16 weights, interleaved; records carry gemv's speedup. */
export async function benchMatmulGemv(gpu: Gpu, shapes: readonly (readonly [number, number])[], reps = 5): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(6);
  for (const [N, K] of shapes) {
    const w = rng.floats(N * K);
    const A = gpu.upload([K], 'f32', rng.floats(K), 'x');
    const weights = { f32: gpu.upload([N, K], 'f32', w, 'w32'), f16: gpu.upload([N, K], 'f16', f32ToF16Bits(w, 'w16'), 'w16') };
    const C = gpu.tensor([N], 'f32', 'y');
    const cases = (['f32', 'f16'] as const).flatMap((weight) =>
      (['naive', 'gemv', 'gemv-vec4', 'gemv-subgroup'] as const)
        .filter(
          (variant) =>
            matmulVariantUnsupported(variant, gpu.ctx.features, matmulDeviceFacts(gpu.ctx), weight) === undefined &&
            matmulShapeUnfit(variant, { M: 1, N, K, transB: true, bDType: weight }) === undefined,
        )
        .map((variant) => ({ weight, variant })),
    );
    const key = (weight: string, variant: string) => `${variant} ${weight}`;
    const med = await interleavedMedians(
      gpu,
      new Map(
        cases.map((c) => [
          key(c.weight, c.variant),
          () => matmul(gpu, A, weights[c.weight], C, { M: 1, N, K }, { transB: true, variant: c.variant }),
        ]),
      ),
      reps,
    );
    for (const c of cases) {
      const seconds = med.get(key(c.weight, c.variant))!;
      const naive = med.get(key(c.weight, 'naive'))!;
      // Memory-bound: the weight bytes read per call over the time.
      const bytes = N * K * (c.weight === 'f16' ? 2 : 4);
      out.push({
        family: 'gemv',
        variant: `${c.variant} ${c.weight} weights (${(naive / seconds).toFixed(2)}x naive)`,
        shape: `1x${N}x${K}`,
        ms: seconds * 1e3,
        gflops: (2 * N * K) / seconds / 1e9,
        gbps: bytes / seconds / 1e9,
      });
    }
    gpu.release(A, weights.f32, weights.f16, C);
  }
  return out;
}

/**
 * A prefill / capture's projections: M rows against [N, K]ᵀ f16 weights (the frozen target's), every
 * f16-weight variant this device runs and the shape fits (naive only where the product is small enough
 * to finish), interleaved rep by rep (`npm run bench -- --only f16w`).
 */
export async function benchMatmulF16w(gpu: Gpu, shapes: readonly (readonly [number, number, number])[], reps = 3): Promise<BenchRecord[]> {
  const facts = matmulDeviceFacts(gpu.ctx);
  const out: BenchRecord[] = [];
  const rng = new Rng(7);
  for (const [M, N, K] of shapes) {
    const shape = { M, N, K, transB: true, bDType: 'f16' as const };
    const A = gpu.upload([M * K], 'f32', rng.floats(M * K), 'x');
    const W = gpu.upload([N * K], 'f16', f32ToF16Bits(rng.floats(N * K), 'w16'), 'w16');
    const C = gpu.tensor([M * N], 'f32', 'y');
    const chosen = chooseMatmulVariant(shape, gpu.ctx.features, facts);
    const variants = MATMUL_F16W_VARIANTS.filter(
      (v) =>
        v !== 'gemv' &&
        v !== 'gemv-vec4' &&
        v !== 'gemv-subgroup' &&
        !(SLOW_ON_LARGE.has(v) && M * N * K > 2 ** 28) &&
        matmulVariantUnsupported(v, gpu.ctx.features, facts, 'f16') === undefined &&
        matmulShapeUnfit(v, shape) === undefined,
    );
    const med = await interleavedMedians(
      gpu,
      new Map(variants.map((v) => [v, () => matmul(gpu, A, W, C, { M, N, K }, { transB: true, variant: v })])),
      reps,
    );
    for (const [v, seconds] of med) {
      out.push({
        family: 'f16w',
        variant: `${v}${v === chosen ? '*' : ''} NT f16 weights`,
        shape: `${M}x${N}x${K}`,
        ms: seconds * 1e3,
        gflops: (2 * M * N * K) / seconds / 1e9,
      });
    }
    gpu.release(A, W, C);
  }
  return out;
}
