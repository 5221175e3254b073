/**
 * A SwiGLU MLP's gate and up projections with the activation in one dispatch
 * (src/kernels/linear-swiglu.ts): against float64 at shapes with partial row and column tiles, bit for
 * bit the two commands it replaces (the stacked product into gu, then swiglu/forward-packed), one
 * dispatch where the device runs matmul/subgroup-vec4, and the cases it leaves to those commands,
 * each named. Its backward is the pair of kernels the MLP's backward runs (swiglu-down-grads.test.ts,
 * linear-grads.test.ts).
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { linearForward } from '../../src/kernels/linear.ts';
import { LINEAR_SWIGLU_MAX_FLOPS, linearSwiglu, linearSwigluUnfit } from '../../src/kernels/linear-swiglu.ts';
import { swigluForwardPacked } from '../../src/kernels/swiglu.ts';
import { matmulRef } from '../../src/reference/matmul.ts';
import { swigluForwardRef } from '../../src/reference/swiglu.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertEqual, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** [rows, hidden, inter]: the fixture draft's MLP (80, 64, 176), partial tiles every way, one tile. */
const SHAPES: readonly [number, number, number][] = [
  [80, 64, 176],
  [36, 68, 44],
  [8, 4, 4],
];

/** gu = x · Wᵀ and act = silu(gate) ⊙ up in float64. */
function reference(x: Float32Array, w: Float32Array, R: number, H: number, I: number): { gu: Float64Array; act: Float64Array } {
  const gu = matmulRef(x, w, undefined, { M: R, N: 2 * I, K: H, transB: true });
  const gate = new Float64Array(R * I);
  const up = new Float64Array(R * I);
  for (let r = 0; r < R; r++) {
    gate.set(gu.subarray(r * 2 * I, r * 2 * I + I), r * I);
    up.set(gu.subarray(r * 2 * I + I, (r + 1) * 2 * I), r * I);
  }
  return { gu, act: swigluForwardRef(gate, up) };
}

export default defineSuite('kernels/linear-swiglu', (t) => {
  t.test('gu and act against float64, and bit for bit the stacked product then swiglu', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const cpuSubgroups = ctx.record.isFallbackAdapter && ctx.hasFeature('subgroups') && (ctx.record.subgroupMinSize ?? 0) >= 8;
    let worst = 0;
    for (const [i, [R, H, I]] of SHAPES.entries()) {
      const shape = { rows: R, hidden: H, inter: I };
      const tag = `${R}x${H}x${I}`;
      const rng = new Rng(400 + i);
      const d = { x: rng.floats(R * H, 2), w: rng.floats(2 * I * H, 0.5) };
      // Saturated gates: σ's limits, not NaN, in the store's SwiGLU.
      for (let k = 3; k < I * H; k += 37) d.w[k] = k % 2 ? 40 : -40;
      const x = gpu.upload([R, H], 'f32', d.x, 'x');
      const w = gpu.upload([2 * I, H], 'f32', d.w, 'W');
      const gu = gpu.tensor([R, 2 * I], 'f32', 'gu');
      const act = gpu.tensor([R, I], 'f32', 'act');
      const ops = { x, w, gu, act };
      const unfit = linearSwigluUnfit(gpu, shape, ops);
      const before = gpu.batcher.stats.dispatches;
      await linearSwiglu(gpu, ops, shape);
      assertEqual(gpu.batcher.stats.dispatches - before, unfit ? 2 : 1, `${tag}: dispatches (${unfit ?? 'fused'})`);
      const gu2 = gpu.tensor([R, 2 * I], 'f32', 'gu2');
      const act2 = gpu.tensor([R, I], 'f32', 'act2');
      await linearForward(gpu, x, w, gu2, { rows: R, inFeatures: H, outFeatures: 2 * I });
      await swigluForwardPacked(gpu, gu2, act2, { rows: R, inter: I });
      const [g1, g2, a1, a2] = await Promise.all([gu, gu2, act, act2].map((v) => gpu.read(v)));
      assert(sameBits(g1, g2) && sameBits(a1, a2), `${tag}: gu and act have the bits of the product + swiglu`);
      assert(a1.every(Number.isFinite), `${tag}: act finite with saturated gates`);
      const ref = reference(d.x, d.w, R, H, I);
      worst = Math.max(worst, assertRelClose(g1, ref.gu, 1e-5, `${tag}: gu`), assertRelClose(a1, ref.act, 1e-5, `${tag}: act`));
      if (cpuSubgroups) assertEqual(unfit, undefined, `${tag}: one dispatch on a CPU adapter with 8-lane subgroups`);
      else note(`${tag} left to two commands`, unfit ?? '');
      gpu.release(x, w, gu, act, gu2, act2);
    }
    note('worst rel err', worst.toExponential(2));
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'every tensor released');
    gpu.destroy();
  });

  t.test(
    'the cases left to two commands are named: an odd width, a shared buffer, a product past the launch-bound size',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const cpuSubgroups = ctx.record.isFallbackAdapter && ctx.hasFeature('subgroups') && (ctx.record.subgroupMinSize ?? 0) >= 8;
      const make = (R: number, H: number, I: number) => ({
        x: gpu.tensor([R, H], 'f32', 'x'),
        w: gpu.tensor([2 * I, H], 'f32', 'W'),
        gu: gpu.tensor([R, 2 * I], 'f32', 'gu'),
        act: gpu.tensor([R, I], 'f32', 'act'),
      });
      const odd = make(8, 4, 6);
      assertEqual(
        linearSwigluUnfit(gpu, { rows: 8, hidden: 4, inter: 6 }, odd),
        'the intermediate width 6 is not a multiple of 4',
        'inter = 6',
      );
      const shape = { rows: 8, hidden: 4, inter: 8 };
      const ops = make(8, 4, 8);
      assertEqual(linearSwigluUnfit(gpu, shape, ops) === undefined, cpuSubgroups, 'distinct buffers fuse on a CPU adapter with subgroups');
      assertEqual(
        linearSwigluUnfit(gpu, shape, { ...ops, act: ops.gu }),
        'gu (gu) shares a GPU buffer with act (gu)',
        'act written over gu',
      );
      // The lab draft's MLP: past the launch-bound size, so the two commands run.
      const lab = make(224, 128, 512);
      assertEqual(
        linearSwigluUnfit(gpu, { rows: 224, hidden: 128, inter: 512 }, lab),
        `the product's 58720256 FLOPs are past the launch-bound size the fused kernel is for (${LINEAR_SWIGLU_MAX_FLOPS})`,
        'a lab-sized MLP',
      );
      gpu.release(...Object.values(odd), ...Object.values(ops), ...Object.values(lab));
      gpu.destroy();
    },
  );
});
