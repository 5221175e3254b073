import { Gpu } from '../../src/gpu/gpu.ts';
import {
  availableMatmulVariants,
  chooseMatmulVariant,
  matmul,
  matmulDeviceFacts,
  matmulVariantUnsupported,
  MATMUL_GEOMETRY,
  MATMUL_F16W_VARIANTS,
  MATMUL_TOLERANCE,
  MATMUL_VARIANTS,
  type MatmulDeviceFacts,
} from '../../src/kernels/matmul.ts';
import { f32ToF16Bits } from '../../src/formats/f16-bits.ts';
import { f16ToF32 } from '../../src/formats/safetensors.ts';
import { matmulRef } from '../../src/reference/matmul.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/**
 * Shapes chosen to end in partial tiles of every variant (MATMUL_GEOMETRY; checked by a test below)
 * as well as to fill tiles exactly, to include degenerate edges, odd K (the subgroup kernel steps K
 * by two) and several tiles in both directions.
 */
const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [37, 53, 29],
  [64, 64, 64],
  [65, 17, 130],
  [128, 96, 33],
  [7, 200, 3],
  [131, 70, 67],
];

/** Test name suffix stating the tolerance of variants held to less than f32 accuracy. */
const toleranceTag = (variant: keyof typeof MATMUL_TOLERANCE) =>
  MATMUL_TOLERANCE[variant] > 1e-5 ? ` (f16 operands, rel. err. <= ${MATMUL_TOLERANCE[variant]})` : '';
/**
 * Weights stored as f16 are held to the f32 variants' 1e-5 against the float64 reference computed
 * on the f16-rounded weights (the kernels widen each weight exactly and then do f32 arithmetic).
 */
const F16W_TOL = 1e-5;

/** f16 bits of `b` for upload, and the f16-rounded values the reference multiplies by. */
function f16Weights(b: Float32Array): { bits: Uint16Array; rounded: Float64Array } {
  const bits = f32ToF16Bits(b, 'test weight');
  return { bits, rounded: Float64Array.from(bits, f16ToF32) };
}

/** Single-row shapes: N and K crossing gemv's tile and lane counts, odd N, a decode-like K. */
const GEMV_SHAPES: [number, number][] = [
  [1, 2],
  [3, 130],
  [37, 66],
  [200, 1030],
  [513, 2048],
];

const LAYOUTS = [
  { transA: false, transB: false, tag: 'NN' },
  { transA: false, transB: true, tag: 'NT (X·Wᵀ)' },
  { transA: true, transB: false, tag: 'TN (dYᵀ·X)' },
  { transA: true, transB: true, tag: 'TT' },
];

export default defineSuite('kernels/matmul', (t) => {
  t.test('the test shapes span several tiles of every variant and end in a partial one, in M and N', () => {
    for (const variant of MATMUL_VARIANTS) {
      const { TILE_M, TILE_N } = MATMUL_GEOMETRY[variant];
      assert(
        SHAPES.some(([M]) => M > TILE_M && M % TILE_M !== 0),
        `${variant}: some M crosses a ${TILE_M}-row tile edge`,
      );
      assert(
        SHAPES.some(([, N]) => N > TILE_N && N % TILE_N !== 0),
        `${variant}: some N crosses a ${TILE_N}-column tile edge`,
      );
    }
  });

  for (const variant of MATMUL_VARIANTS) {
    for (const layout of LAYOUTS) {
      t.test(`${variant} ${layout.tag} over odd shapes vs float64${toleranceTag(variant)}`, async ({ gpu: ctx, note }) => {
        const gpu = new Gpu(ctx);
        const unsupported = matmulVariantUnsupported(variant, ctx.features, matmulDeviceFacts(ctx));
        if (unsupported) {
          // Feature-gated variant on a device without the feature: it must be refused, loudly.
          const A = gpu.tensor([4], 'f32');
          let refused = '';
          await matmul(gpu, A, A, A, { M: 2, N: 2, K: 2 }, { ...layout, variant }).catch((e: Error) => (refused = e.message));
          assert(refused.includes(unsupported), `${variant} on a device without its feature: expected "${unsupported}", got "${refused}"`);
          note('unsupported', unsupported);
          gpu.destroy();
          return;
        }
        const rng = new Rng(1234);
        let worst = 0;
        for (const [M, N, K] of SHAPES) {
          const a = rng.floats(M * K);
          const b = rng.floats(K * N);
          const A = gpu.upload([M * K], 'f32', a, 'A');
          const B = gpu.upload([K * N], 'f32', b, 'B');
          const C = gpu.tensor([M * N], 'f32', 'C');
          await matmul(gpu, A, B, C, { M, N, K }, { ...layout, variant });
          const got = await gpu.read(C);
          const want = matmulRef(a, b, undefined, { M, N, K, ...layout });
          worst = Math.max(worst, assertRelClose(got, want, MATMUL_TOLERANCE[variant], `${variant} ${layout.tag} ${M}x${N}x${K}`));
          gpu.release(A, B, C);
        }
        if (MATMUL_TOLERANCE[variant] > 1e-5) {
          // The f16 variant must really round its operands (random operands lose ~1e-4 relative).
          assert(worst > 1e-5, `${variant} ${layout.tag}: error ${worst} is at f32 level; operands were not rounded to f16`);
        }
        note('worstRelErr', worst);
        gpu.destroy();
      });
    }
  }

  t.test('batched with broadcast B, alpha and beta accumulate', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(7);
    const [M, N, K, batch] = [19, 70, 45, 3];
    const a = rng.floats(batch * M * K);
    const b = rng.floats(N * K);
    const c0 = rng.floats(batch * M * N);
    const worst = { f32: 0, f16: 0 };
    for (const variant of availableMatmulVariants(ctx.features, matmulDeviceFacts(ctx))) {
      const A = gpu.upload([batch * M * K], 'f32', a);
      const B = gpu.upload([N * K], 'f32', b);
      const C = gpu.upload([batch * M * N], 'f32', c0);
      await matmul(gpu, A, B, C, { M, N, K }, { transB: true, batch, strideB: 0, alpha: 0.5, beta: 1, variant });
      const got = await gpu.read(C);
      const want = matmulRef(a, b, c0, { M, N, K, transB: true, batch, strideB: 0, alpha: 0.5, beta: 1 });
      const precision = MATMUL_TOLERANCE[variant] > 1e-5 ? 'f16' : 'f32';
      worst[precision] = Math.max(worst[precision], assertRelClose(got, want, MATMUL_TOLERANCE[variant], `${variant} batched`));
      gpu.release(A, B, C);
    }
    note('worstRelErrF32', worst.f32);
    note('worstRelErrF16', worst.f16);
    gpu.destroy();
  });

  t.test('beta = 0 ignores NaN garbage in C', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const [M, N, K] = [33, 33, 8];
    const rng = new Rng(3);
    const a = rng.floats(M * K);
    const b = rng.floats(K * N);
    for (const variant of availableMatmulVariants(ctx.features, matmulDeviceFacts(ctx))) {
      const A = gpu.upload([M * K], 'f32', a);
      const B = gpu.upload([K * N], 'f32', b);
      const C = gpu.upload([M * N], 'f32', new Float32Array(M * N).fill(Number.NaN));
      await matmul(gpu, A, B, C, { M, N, K }, { variant });
      assertRelClose(await gpu.read(C), matmulRef(a, b, undefined, { M, N, K }), MATMUL_TOLERANCE[variant], variant);
      gpu.release(A, B, C);
    }
    gpu.destroy();
  });

  t.test('variant policy is a pure function of shape, features and device facts', () => {
    const none = new Set<string>();
    const all = new Set(['shader-f16', 'subgroups']);
    const gpuFacts: MatmulDeviceFacts = { fallbackAdapter: false, subgroupMinSize: 32, subgroupMaxSize: 32 };
    const cpu8: MatmulDeviceFacts = { fallbackAdapter: true, subgroupMinSize: 8, subgroupMaxSize: 8 };
    const cpu4: MatmulDeviceFacts = { fallbackAdapter: true, subgroupMinSize: 4, subgroupMaxSize: 4 };
    assertEqual(chooseMatmulVariant({ M: 1, N: 64, K: 4096 }), 'naive', 'tiny output');
    assertEqual(chooseMatmulVariant({ M: 1, N: 4096, K: 4096 }, all, cpu8), 'naive', 'GEMV on a CPU adapter');
    assertEqual(chooseMatmulVariant({ M: 8, N: 64, K: 256 }, all, cpu8), 'subgroup', 'small output, several rows, CPU adapter');
    assertEqual(chooseMatmulVariant({ M: 2048, N: 8, K: 64 }, all, cpu8), 'subgroup', 'tall, CPU adapter');
    assertEqual(chooseMatmulVariant({ M: 8, N: 1024, K: 1024 }, new Set(), cpu8), 'naive', 'few rows, CPU adapter without subgroups');
    assertEqual(chooseMatmulVariant({ M: 1024, N: 4, K: 1024 }, new Set(), cpu8), 'naive', 'few columns, CPU adapter without subgroups');
    assertEqual(chooseMatmulVariant({ M: 256, N: 256, K: 256 }), 'tiled', 'square, no facts');
    assertEqual(chooseMatmulVariant({ M: 2048, N: 8, K: 64 }), 'tiled', 'tall');
    assertEqual(chooseMatmulVariant({ M: 256, N: 256, K: 256 }, all, gpuFacts), 'tiled', 'GPU with every feature');
    assertEqual(chooseMatmulVariant({ M: 256, N: 256, K: 256 }, all, cpu8), 'subgroup', 'CPU adapter with 8-lane subgroups');
    assertEqual(
      chooseMatmulVariant({ M: 256, N: 256, K: 256 }, new Set(['shader-f16']), cpu8),
      'blocked',
      'CPU adapter without subgroups (Deno)',
    );
    assertEqual(chooseMatmulVariant({ M: 256, N: 256, K: 256 }, all, cpu4), 'blocked', 'CPU adapter with 4-lane subgroups');
    assertEqual(chooseMatmulVariant({ M: 256, N: 256, K: 256 }, all, { fallbackAdapter: true }), 'blocked', 'subgroup size unknown');
    assertEqual(
      chooseMatmulVariant({ M: 256, N: 256, K: 256 }, none, {}),
      chooseMatmulVariant({ M: 256, N: 256, K: 256 }, none, {}),
      'deterministic',
    );
    assertDeepEqual(availableMatmulVariants(none, cpu8), ['naive', 'tiled', 'blocked'], 'baseline variants need nothing');
    assertDeepEqual(
      availableMatmulVariants(all, cpu8),
      ['naive', 'tiled', 'blocked', 'subgroup', 'tiled-f16'],
      'every variant with every feature',
    );
    assertDeepEqual(
      availableMatmulVariants(all, cpu4),
      ['naive', 'tiled', 'blocked', 'tiled-f16'],
      'no subgroup kernel on 4-lane subgroups',
    );
  });

  for (const variant of MATMUL_F16W_VARIANTS.filter((v) => v !== 'gemv')) {
    for (const layout of LAYOUTS) {
      t.test(
        `${variant} ${layout.tag} with f16 weights vs float64 on the f16-rounded weights (rel. err. <= ${F16W_TOL})`,
        async ({ gpu: ctx, note }) => {
          const gpu = new Gpu(ctx);
          const unsupported = matmulVariantUnsupported(variant, ctx.features, matmulDeviceFacts(ctx), 'f16');
          if (unsupported) {
            const A = gpu.tensor([4], 'f32');
            const B = gpu.tensor([4], 'f16');
            await assertRejects(
              () => matmul(gpu, A, B, A, { M: 2, N: 2, K: 2 }, { ...layout, variant }),
              new RegExp(unsupported.replace(/[()]/g, '.')),
              `${variant} f16w refused`,
            );
            note('unsupported', unsupported);
            gpu.destroy();
            return;
          }
          const rng = new Rng(99);
          let worst = 0;
          let unrounded = 0;
          for (const [M, N, K] of SHAPES) {
            const a = rng.floats(M * K);
            const b = rng.floats(K * N);
            const { bits, rounded } = f16Weights(b);
            const A = gpu.upload([M * K], 'f32', a, 'A');
            const B = gpu.upload([K * N], 'f16', bits, 'B');
            const C = gpu.tensor([M * N], 'f32', 'C');
            await matmul(gpu, A, B, C, { M, N, K }, { ...layout, variant });
            const got = await gpu.read(C);
            worst = Math.max(
              worst,
              assertRelClose(
                got,
                matmulRef(a, rounded, undefined, { M, N, K, ...layout }),
                F16W_TOL,
                `${variant} f16w ${layout.tag} ${M}x${N}x${K}`,
              ),
            );
            unrounded = Math.max(
              unrounded,
              assertRelClose(got, matmulRef(a, b, undefined, { M, N, K, ...layout }), 1e-2, 'vs f32 weights'),
            );
            gpu.release(A, B, C);
          }
          // The kernel must really read f16: against the unrounded weights it is off by f16 rounding.
          assert(unrounded > 1e-5, `${variant} f16w: error vs the f32 weights ${unrounded} is at f32 level`);
          note('worstRelErr', worst);
          note('relErrVsF32Weights', unrounded);
          gpu.destroy();
        },
      );
    }
  }

  for (const weight of ['f32', 'f16'] as const) {
    t.test(
      `gemv with ${weight} weights: one row times [N, K]ᵀ, batched, alpha/beta, vs float64 (rel. err. <= 1e-5)`,
      async ({ gpu: ctx, note }) => {
        const gpu = new Gpu(ctx);
        const rng = new Rng(weight === 'f32' ? 5 : 6);
        let worst = 0;
        const shapes = weight === 'f32' ? [...GEMV_SHAPES, [5, 1] as [number, number], [70, 33] as [number, number]] : GEMV_SHAPES;
        for (const [N, K] of shapes) {
          for (const batch of [1, 2]) {
            const a = rng.floats(batch * K);
            const raw = rng.floats(batch * N * K);
            const { bits, rounded } = f16Weights(raw);
            const c0 = rng.floats(batch * N);
            const A = gpu.upload([batch * K], 'f32', a, 'A');
            const B = weight === 'f16' ? gpu.upload([batch * N * K], 'f16', bits, 'B') : gpu.upload([batch * N * K], 'f32', raw, 'B');
            const C = gpu.upload([batch * N], 'f32', c0, 'C');
            const args = { M: 1, N, K, transB: true, batch, alpha: 0.5, beta: batch === 2 ? 1 : 0 };
            await matmul(gpu, A, B, C, { M: 1, N, K }, { ...args, variant: 'gemv' });
            const want = matmulRef(a, weight === 'f16' ? rounded : raw, c0, args);
            worst = Math.max(
              worst,
              assertRelClose(await gpu.read(C), want, MATMUL_TOLERANCE.gemv, `gemv ${weight} N=${N} K=${K} batch=${batch}`),
            );
            gpu.release(A, B, C);
          }
        }
        note('worstRelErr', worst);
        gpu.destroy();
      },
    );
  }

  t.test('f16 weights and gemv refuse what they cannot compute, naming the tensor', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const A = gpu.tensor([8], 'f32', 'act');
    const W = gpu.tensor([8], 'f16', 'w16');
    const W32 = gpu.tensor([8], 'f32', 'w32');
    const C = gpu.tensor([8], 'f32', 'out');
    await assertRejects(() => matmul(gpu, W, W, C, { M: 2, N: 2, K: 2 }), /A \(w16\) must be f32, got f16/, 'f16 A');
    await assertRejects(() => matmul(gpu, A, W, W, { M: 2, N: 2, K: 2 }), /C \(w16\) must be f32, got f16/, 'f16 C');
    await assertRejects(
      () => matmul(gpu, A, W, C, { M: 2, N: 2, K: 2 }, { variant: 'tiled-f16' }),
      /tiled-f16 has no f16-weight version/,
      'tiled-f16 with f16 B',
    );
    await assertRejects(
      () => matmul(gpu, A, W32, C, { M: 2, N: 2, K: 2 }, { variant: 'gemv', transB: true }),
      /gemv computes one row \(M = 1\), got M=2/,
      'gemv M=2',
    );
    await assertRejects(
      () => matmul(gpu, A, W32, C, { M: 1, N: 2, K: 2 }, { variant: 'gemv' }),
      /gemv needs transB \(B \(w32\)/,
      'gemv without transB',
    );
    await assertRejects(
      () => matmul(gpu, A, W, C, { M: 1, N: 2, K: 3 }, { variant: 'gemv', transB: true }),
      /gemv reads f16 B \(w16\) in \(k, k\+1\) pairs and needs an even K/,
      'gemv f16 odd K',
    );
    gpu.release(A, W, W32, C);
    gpu.destroy();
  });

  t.test('policy: gemv for single f16-weight rows, the f32 choice otherwise (f32 weights unchanged)', () => {
    const all = new Set(['shader-f16', 'subgroups']);
    const cpu8: MatmulDeviceFacts = { fallbackAdapter: true, subgroupMinSize: 8, subgroupMaxSize: 8 };
    const gpuFacts: MatmulDeviceFacts = { fallbackAdapter: false, subgroupMinSize: 32, subgroupMaxSize: 32 };
    const decode = { M: 1, N: 8192, K: 2048, transB: true };
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f16' }, all, cpu8), 'gemv', 'decode step, f16 weights, CPU adapter');
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f16' }, all, gpuFacts), 'gemv', 'decode step, f16 weights, GPU');
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f32' }, all, cpu8), 'naive', 'decode step, f32 weights: as before');
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f16', K: 2047 }, all, cpu8), 'naive', 'odd K: rows would start mid-word');
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f16', transB: false }, all, cpu8), 'naive', 'untransposed weight');
    assertEqual(
      chooseMatmulVariant({ M: 64, N: 2048, K: 2048, transB: true, bDType: 'f16' }, all, cpu8),
      'subgroup',
      'prefill, f16 weights, CPU adapter',
    );
    assertEqual(
      chooseMatmulVariant({ M: 64, N: 2048, K: 2048, transB: true, bDType: 'f16' }, new Set(), cpu8),
      'blocked',
      'prefill, f16 weights, no subgroups',
    );
    assertEqual(
      chooseMatmulVariant({ M: 64, N: 2048, K: 2048, transB: true, bDType: 'f16' }, all, gpuFacts),
      'tiled',
      'prefill, f16 weights, GPU',
    );
    for (const variant of MATMUL_F16W_VARIANTS)
      assertEqual(matmulVariantUnsupported(variant, all, cpu8, 'f16'), undefined, `${variant} has an f16-weight kernel`);
  });
});
