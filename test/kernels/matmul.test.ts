import { Gpu } from '../../src/gpu/gpu.ts';
import {
  availableMatmulVariants,
  chooseMatmulVariant,
  matmul,
  matmulDeviceFacts,
  matmulShapeUnfit,
  matmulVariantUnsupported,
  MATMUL_GEOMETRY,
  MATMUL_TOLERANCE,
  MATMUL_VARIANTS,
  type MatmulDeviceFacts,
} from '../../src/kernels/matmul.ts';
import { matmulRef } from '../../src/reference/matmul.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

import { LAYOUTS, SHAPES, toleranceTag, vec4BitDifferences } from './matmul-cases.ts';

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
        let fitted = 0;
        for (const [M, N, K] of SHAPES) {
          const a = rng.floats(M * K);
          const b = rng.floats(K * N);
          const A = gpu.upload([M * K], 'f32', a, 'A');
          const B = gpu.upload([K * N], 'f32', b, 'B');
          const C = gpu.tensor([M * N], 'f32', 'C');
          const unfit = matmulShapeUnfit(variant, { M, N, K, ...layout });
          if (unfit) {
            // A shape the variant cannot read (subgroup-vec4's multiples of 4) is refused naming it.
            await assertRejects(
              () => matmul(gpu, A, B, C, { M, N, K }, { ...layout, variant }),
              new RegExp(unfit.replace(/[()]/g, '\\$&')),
              `${variant} ${M}x${N}x${K}`,
            );
            gpu.release(A, B, C);
            continue;
          }
          fitted++;
          await matmul(gpu, A, B, C, { M, N, K }, { ...layout, variant });
          const got = await gpu.read(C);
          const want = matmulRef(a, b, undefined, { M, N, K, ...layout });
          worst = Math.max(worst, assertRelClose(got, want, MATMUL_TOLERANCE[variant], `${variant} ${layout.tag} ${M}x${N}x${K}`));
          gpu.release(A, B, C);
        }
        assert(fitted >= 4, `${variant} ${layout.tag}: only ${fitted} shapes computed`);
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
    // N and K multiples of 4, so every variant (subgroup-vec4 included) computes it.
    const [M, N, K, batch] = [19, 72, 44, 3];
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

  t.test(
    'subgroup-vec4 adds in the k order of subgroup: the same bits, in every layout, batched with alpha and beta',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const facts = matmulDeviceFacts(ctx);
      const unsupported = matmulVariantUnsupported('subgroup-vec4', ctx.features, facts);
      if (unsupported) {
        // Without 8-lane subgroups neither kernel runs: both refuse, naming why.
        const A = gpu.tensor([16], 'f32');
        await assertRejects(() => matmul(gpu, A, A, A, { M: 4, N: 4, K: 4 }, { variant: 'subgroup-vec4' }), /needs/, 'refused');
        gpu.destroy();
        return;
      }
      const rng = new Rng(11);
      const [M, N, K, batch] = [68, 100, 132, 2];
      const a = rng.floats(batch * M * K);
      const b = rng.floats(batch * K * N);
      const c0 = rng.floats(batch * M * N);
      for (const { tag, differ } of await vec4BitDifferences(gpu, { M, N, K, batch }, a, { dtype: 'f32', data: b }, c0)) {
        assertEqual(differ, -1, `${tag}: first differing element`);
      }
      gpu.destroy();
    },
  );

  t.test('beta = 0 ignores NaN garbage in C', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const [M, N, K] = [33, 36, 8];
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
    assertEqual(chooseMatmulVariant({ M: 8, N: 64, K: 256 }, all, cpu8), 'subgroup-vec4', 'small output, several rows, CPU adapter');
    assertEqual(chooseMatmulVariant({ M: 2048, N: 8, K: 64 }, all, cpu8), 'subgroup-vec4', 'tall, CPU adapter');
    assertEqual(chooseMatmulVariant({ M: 8, N: 66, K: 256 }, all, cpu8), 'subgroup', 'N not a multiple of 4, CPU adapter');
    assertEqual(
      chooseMatmulVariant({ M: 10, N: 64, K: 256, transA: true }, all, cpu8),
      'subgroup',
      'A transposed with M = 10, CPU adapter',
    );
    assertEqual(chooseMatmulVariant({ M: 8, N: 64, K: 256, bDType: 'f16' }, all, cpu8), 'subgroup-vec4', 'f16 weights, CPU adapter');
    assertEqual(chooseMatmulVariant({ M: 8, N: 64, K: 254, bDType: 'f16' }, all, cpu8), 'subgroup', 'f16 weights, K not a multiple of 4');
    assertEqual(
      chooseMatmulVariant({ M: 8, N: 64, K: 256, batch: 2, strides: { a: 2048, b: 0, c: 514 } }, all, cpu8),
      'subgroup',
      'a batch stride not a multiple of 4, CPU adapter',
    );
    assertEqual(chooseMatmulVariant({ M: 8, N: 1024, K: 1024 }, new Set(), cpu8), 'naive', 'few rows, CPU adapter without subgroups');
    assertEqual(chooseMatmulVariant({ M: 1024, N: 4, K: 1024 }, new Set(), cpu8), 'naive', 'few columns, CPU adapter without subgroups');
    assertEqual(chooseMatmulVariant({ M: 256, N: 256, K: 256 }), 'tiled', 'square, no facts');
    assertEqual(chooseMatmulVariant({ M: 2048, N: 8, K: 64 }), 'tiled', 'tall');
    assertEqual(chooseMatmulVariant({ M: 256, N: 256, K: 256 }, all, gpuFacts), 'tiled', 'GPU with every feature');
    assertEqual(chooseMatmulVariant({ M: 256, N: 256, K: 256 }, all, cpu8), 'subgroup-vec4', 'CPU adapter with 8-lane subgroups');
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
      ['naive', 'tiled', 'blocked', 'subgroup', 'subgroup-vec4', 'tiled-f16'],
      'every variant with every feature',
    );
    assertDeepEqual(
      availableMatmulVariants(all, cpu4),
      ['naive', 'tiled', 'blocked', 'tiled-f16'],
      'no subgroup kernel on 4-lane subgroups',
    );
  });
});
