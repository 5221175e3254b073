import { Gpu } from '../../src/gpu/gpu.ts';
import {
  chooseMatmulVariant,
  matmul,
  matmulDeviceFacts,
  matmulShapeUnfit,
  matmulVariantUnsupported,
  MATMUL_F16W_VARIANTS,
  MATMUL_TOLERANCE,
  type MatmulDeviceFacts,
} from '../../src/kernels/matmul.ts';
import { matmulRef } from '../../src/reference/matmul.ts';
import { f16ToF32 } from '../../src/formats/safetensors.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertEqual, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

import { F16W_TOL, f16Weights, GEMV_SHAPES, LAYOUTS, SHAPES, vec4BitDifferences } from './matmul-cases.ts';

export default defineSuite('kernels/matmul-f16w', (t) => {
  for (const variant of MATMUL_F16W_VARIANTS.filter((v) => v !== 'gemv' && v !== 'gemv-vec4' && v !== 'gemv-subgroup')) {
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
          let fitted = 0;
          for (const [M, N, K] of SHAPES) {
            const a = rng.floats(M * K);
            const b = rng.floats(K * N);
            const { bits, rounded } = f16Weights(b);
            const A = gpu.upload([M * K], 'f32', a, 'A');
            const B = gpu.upload([K * N], 'f16', bits, 'B');
            const C = gpu.tensor([M * N], 'f32', 'C');
            const unfit = matmulShapeUnfit(variant, { M, N, K, ...layout, bDType: 'f16' });
            if (unfit) {
              // subgroup-vec4 reads four weights per load: other shapes are refused, naming the dimension.
              await assertRejects(
                () => matmul(gpu, A, B, C, { M, N, K }, { ...layout, variant }),
                new RegExp(unfit.replace(/[()]/g, '\\$&')),
                `${variant} f16w ${M}x${N}x${K}`,
              );
              gpu.release(A, B, C);
              continue;
            }
            fitted++;
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
          assert(fitted >= 4, `${variant} f16w ${layout.tag}: only ${fitted} shapes computed`);
          // The kernel must really read f16: against the unrounded weights it is off by f16 rounding.
          assert(unrounded > 1e-5, `${variant} f16w: error vs the f32 weights ${unrounded} is at f32 level`);
          note('worstRelErr', worst);
          note('relErrVsF32Weights', unrounded);
          gpu.destroy();
        },
      );
    }
  }

  t.test(
    'subgroup-vec4 with f16 weights adds in the k order of subgroup-f16w: the same bits, every layout, batched; one weight for every batch vs float64',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const unsupported = matmulVariantUnsupported('subgroup-vec4', ctx.features, matmulDeviceFacts(ctx), 'f16');
      if (unsupported) {
        const A = gpu.tensor([16], 'f32');
        const B = gpu.tensor([16], 'f16');
        await assertRejects(() => matmul(gpu, A, B, A, { M: 4, N: 4, K: 4 }, { variant: 'subgroup-vec4' }), /needs/, 'refused');
        gpu.destroy();
        return;
      }
      const rng = new Rng(12);
      const [M, N, K, batch] = [68, 100, 132, 2];
      const a = rng.floats(batch * M * K);
      const { bits } = f16Weights(rng.floats(batch * K * N));
      const c0 = rng.floats(batch * M * N);
      for (const { tag, differ } of await vec4BitDifferences(gpu, { M, N, K, batch }, a, { dtype: 'f16', data: bits }, c0)) {
        assertEqual(differ, -1, `${tag}: first differing element`);
      }
      // One weight for every batch (strideB = 0, how a Linear layer is batched), against float64.
      const A = gpu.upload([a.length], 'f32', a);
      const B = gpu.upload([K * N], 'f16', bits.subarray(0, K * N));
      const C = gpu.tensor([batch * M * N], 'f32');
      await matmul(gpu, A, B, C, { M, N, K }, { transB: true, batch, strideB: 0, variant: 'subgroup-vec4' });
      const got = await gpu.read(C);
      const rounded = Float64Array.from(bits.subarray(0, K * N), f16ToF32);
      for (let b = 0; b < batch; b++) {
        const want = matmulRef(a.subarray(b * M * K, (b + 1) * M * K), rounded, undefined, { M, N, K, transB: true });
        assertRelClose(got.subarray(b * M * N, (b + 1) * M * N), want, F16W_TOL, `broadcast weight, batch ${b}`);
      }
      gpu.release(A, B, C);
      gpu.destroy();
    },
  );

  for (const variant of ['gemv', 'gemv-vec4', 'gemv-subgroup'] as const) {
    for (const weight of ['f32', 'f16'] as const) {
      t.test(
        `${variant} with ${weight} weights: one row times [N, K]ᵀ, batched, alpha/beta, vs float64 (rel. err. <= 1e-5)`,
        async ({ gpu: ctx, note }) => {
          const gpu = new Gpu(ctx);
          const unsupported = matmulVariantUnsupported(variant, ctx.features, matmulDeviceFacts(ctx), weight);
          if (unsupported) {
            // gemv-subgroup needs 8-lane subgroups: refused with that reason where there are none.
            const [A, B] = [gpu.tensor([8], 'f32'), gpu.tensor([8], weight)];
            await assertRejects(
              () => matmul(gpu, A, B, A, { M: 1, N: 1, K: 8 }, { transB: true, variant }),
              new RegExp(unsupported.replace(/[()]/g, '.')),
              `${variant} refused`,
            );
            note('unsupported', unsupported);
            gpu.destroy();
            return;
          }
          const rng = new Rng(weight === 'f32' ? 5 : 6);
          let worst = 0;
          let computed = 0;
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
              const unfit = matmulShapeUnfit(variant, { ...args, bDType: weight });
              if (unfit) {
                // gemv-vec4 reads whole vec4s of a row: other K are refused, naming K.
                await assertRejects(() => matmul(gpu, A, B, C, { M: 1, N, K }, { ...args, variant }), /needs K=\d+ a multiple of/, unfit);
              } else {
                computed++;
                await matmul(gpu, A, B, C, { M: 1, N, K }, { ...args, variant });
                const want = matmulRef(a, weight === 'f16' ? rounded : raw, c0, args);
                worst = Math.max(
                  worst,
                  assertRelClose(await gpu.read(C), want, MATMUL_TOLERANCE[variant], `${variant} ${weight} N=${N} K=${K} batch=${batch}`),
                );
              }
              gpu.release(A, B, C);
            }
          }
          assert(computed >= 6, `${variant} ${weight}: only ${computed} cases computed`);
          note('worstRelErr', worst);
          gpu.destroy();
        },
      );
    }
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
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f16' }, all, cpu8), 'gemv-subgroup', 'decode step, f16 weights, CPU adapter');
    assertEqual(
      chooseMatmulVariant({ ...decode, bDType: 'f16' }, new Set(['shader-f16']), cpu8),
      'gemv-vec4',
      'the same without subgroups',
    );
    assertEqual(
      chooseMatmulVariant({ ...decode, bDType: 'f16' }, all, { ...cpu8, subgroupMinSize: 4 }),
      'gemv-vec4',
      'the same with subgroups narrower than 8 lanes',
    );
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f16' }, all, gpuFacts), 'gemv-vec4', 'decode step, f16 weights, GPU');
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f16', K: 2050 }, all, cpu8), 'gemv', 'even K, not a multiple of 8');
    assertEqual(
      chooseMatmulVariant({ ...decode, bDType: 'f16', batch: 2, strides: { a: 2048, b: 2050 * 4, c: 8192 } }, all, cpu8),
      'gemv-subgroup',
      'batch strides multiples of 8',
    );
    assertEqual(
      chooseMatmulVariant({ ...decode, bDType: 'f16', batch: 2, strides: { a: 2048, b: 8192 * 2048 + 2, c: 8192 } }, all, cpu8),
      'gemv',
      'a weight batch stride not a multiple of 8',
    );
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f32' }, all, cpu8), 'naive', 'decode step, f32 weights: as before');
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f16', K: 2047 }, all, cpu8), 'naive', 'odd K: rows would start mid-word');
    assertEqual(chooseMatmulVariant({ ...decode, bDType: 'f16', transB: false }, all, cpu8), 'naive', 'untransposed weight');
    assertEqual(
      chooseMatmulVariant({ M: 64, N: 2048, K: 2048, transB: true, bDType: 'f16' }, all, cpu8),
      'subgroup-vec4',
      'prefill, f16 weights, CPU adapter',
    );
    assertEqual(
      chooseMatmulVariant({ M: 64, N: 2048, K: 2046, transB: true, bDType: 'f16' }, all, cpu8),
      'subgroup',
      'prefill, f16 weights, K not a multiple of 4',
    );
    assertEqual(
      chooseMatmulVariant(
        { M: 64, N: 2048, K: 2048, transB: true, bDType: 'f16', batch: 2, strides: { a: 64 * 2048, b: 2048 * 2048 + 2, c: 64 * 2048 } },
        all,
        cpu8,
      ),
      'subgroup',
      'f16 weights, a batched weight stride not a multiple of 4',
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
