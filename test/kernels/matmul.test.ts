import { Gpu } from '../../src/gpu/gpu.ts';
import { chooseMatmulVariant, matmul, type MatmulVariant } from '../../src/kernels/matmul.ts';
import { matmulRef } from '../../src/reference/matmul.ts';
import { Rng } from '../../src/reference/random.ts';
import { assertEqual, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** Shapes chosen to miss every tile size (16, 64) and to include degenerate edges. */
const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [37, 53, 29],
  [64, 64, 64],
  [65, 17, 130],
  [128, 96, 33],
  [7, 200, 3],
];

const VARIANTS: MatmulVariant[] = ['naive', 'tiled'];
const LAYOUTS = [
  { transA: false, transB: false, tag: 'NN' },
  { transA: false, transB: true, tag: 'NT (X·Wᵀ)' },
  { transA: true, transB: false, tag: 'TN (dYᵀ·X)' },
  { transA: true, transB: true, tag: 'TT' },
];

export default defineSuite('kernels/matmul', (t) => {
  for (const variant of VARIANTS) {
    for (const layout of LAYOUTS) {
      t.test(`${variant} ${layout.tag} over odd shapes vs float64`, async ({ gpu: ctx, note }) => {
        const gpu = new Gpu(ctx);
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
          worst = Math.max(worst, assertRelClose(got, want, 1e-5, `${variant} ${layout.tag} ${M}x${N}x${K}`));
          gpu.release(A, B, C);
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
    let worst = 0;
    for (const variant of VARIANTS) {
      const A = gpu.upload([batch * M * K], 'f32', a);
      const B = gpu.upload([N * K], 'f32', b);
      const C = gpu.upload([batch * M * N], 'f32', c0);
      await matmul(gpu, A, B, C, { M, N, K }, { transB: true, batch, strideB: 0, alpha: 0.5, beta: 1, variant });
      const got = await gpu.read(C);
      const want = matmulRef(a, b, c0, { M, N, K, transB: true, batch, strideB: 0, alpha: 0.5, beta: 1 });
      worst = Math.max(worst, assertRelClose(got, want, 1e-5, `${variant} batched`));
      gpu.release(A, B, C);
    }
    note('worstRelErr', worst);
    gpu.destroy();
  });

  t.test('beta = 0 ignores NaN garbage in C', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const [M, N, K] = [33, 33, 8];
    const rng = new Rng(3);
    const a = rng.floats(M * K);
    const b = rng.floats(K * N);
    for (const variant of VARIANTS) {
      const A = gpu.upload([M * K], 'f32', a);
      const B = gpu.upload([K * N], 'f32', b);
      const C = gpu.upload([M * N], 'f32', new Float32Array(M * N).fill(Number.NaN));
      await matmul(gpu, A, B, C, { M, N, K }, { variant });
      assertRelClose(await gpu.read(C), matmulRef(a, b, undefined, { M, N, K }), 1e-5, variant);
      gpu.release(A, B, C);
    }
    gpu.destroy();
  });

  t.test('variant policy is a pure function of shape', () => {
    assertEqual(chooseMatmulVariant({ M: 1, N: 64, K: 4096 }), 'naive', 'tiny output');
    assertEqual(chooseMatmulVariant({ M: 256, N: 256, K: 256 }), 'tiled', 'square');
    assertEqual(chooseMatmulVariant({ M: 2048, N: 8, K: 64 }), 'tiled', 'tall');
  });
});
