/**
 * The ceiling kernels (src/kernels/ceiling.ts) against their plain references: the fma chains match
 * src/reference/ceiling.ts, the vec4 copy is exact (NaN payloads included), and bad arguments are
 * refused naming them. They have no backward: they measure the adapter, nothing is trained through them.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { CEILING_GEOMETRY, copyVec4, fmaPeak, fmaPeakFlops } from '../../src/kernels/ceiling.ts';
import { fmaPeakReference } from '../../src/reference/ceiling.ts';
import { assert, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('kernels/ceiling', (t) => {
  t.test(
    'fma chains: every invocation matches the reference within one f32 rounding per step (WGSL may leave fma unfused)',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      try {
        const n = 4 * CEILING_GEOMETRY.WG;
        for (const [iters, a, b] of [
          [0, 0.999, 0.001],
          [1, 0.5, 0.25],
          [300, 0.999, 0.001],
          [257, -0.75, 1.5],
        ] as const) {
          const out = gpu.tensor([n], 'f32');
          await fmaPeak(gpu, out, iters, a, b);
          const got = await gpu.read(out);
          const want = fmaPeakReference(n, CEILING_GEOMETRY.CHAINS, iters, a, b);
          let worst = 0;
          for (let g = 0; g < n; g++) worst = Math.max(worst, Math.abs(got[g] - want[g]) / Math.max(1, Math.abs(want[g])));
          // Each step may round once more than the reference (an unfused fma): at most about one ulp
          // (2^-23 relative) per step, which |a| < 1 does not let grow.
          const tolerance = 1e-6 + iters * 2 ** -23;
          assert(worst <= tolerance, `iters ${iters}, a ${a}, b ${b}: worst relative error ${worst} > ${tolerance}`);
          note(`iters ${iters}: worst rel err`, worst.toExponential(2));
          gpu.release(out);
        }
        assertEqual(fmaPeakFlops(64, 10), 64 * 10 * CEILING_GEOMETRY.CHAINS * 8, 'FLOPs: 2 per lane per fma');
      } finally {
        gpu.destroy();
      }
    },
  );

  t.test('vec4 copy: exact, NaN payloads and all, over a grid that strides; bad arguments named', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    try {
      const count = 4 * 1000 + 4;
      const bits = Uint32Array.from({ length: count }, (_, i) => (i * 2654435761) >>> 0);
      bits[5] = 0x7fc01234; // a NaN with a payload
      const src = gpu.upload([count], 'f32', new Float32Array(bits.buffer));
      const dst = gpu.tensor([count], 'f32');
      await copyVec4(gpu, src, dst, 3);
      const back = new Uint32Array((await gpu.read(dst)).slice().buffer);
      assert(
        back.every((v, i) => v === bits[i]),
        'every bit copied',
      );
      const odd = gpu.tensor([6], 'f32');
      await assertRejects(() => copyVec4(gpu, odd, odd), /copyVec4: src has 6 elements, not a whole number of vec4s/, 'not vec4s');
      const out = gpu.tensor([100], 'f32');
      await assertRejects(
        () => fmaPeak(gpu, out, 4),
        /fmaPeak: invocations \(out's 100 elements\) must be a multiple of 64/,
        'not a multiple of WG',
      );
      const full = gpu.tensor([64], 'f32');
      await assertRejects(() => fmaPeak(gpu, full, 4, 1.5), /fmaPeak: \|a\| must be below 1/, 'an unbounded recurrence');
      gpu.release(src, dst, odd, out, full);
    } finally {
      gpu.destroy();
    }
  });
});
