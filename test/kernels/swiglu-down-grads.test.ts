/**
 * The backward of a packed SwiGLU MLP's down projection in one dispatch (src/kernels/swiglu-down-grads.ts):
 * against float64 at shapes with partial row and column tiles, bit for bit the two commands it replaces
 * (the pair of products into dAct, then swiglu/backward-packed), one dispatch where the device runs the
 * pair kernel, and the cases it leaves to those commands, each named.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { linearGrads } from '../../src/kernels/linear-grads.ts';
import { swigluBackwardPacked, swigluForwardPacked } from '../../src/kernels/swiglu.ts';
import { SWIGLU_DOWN_FUSED_MAX_FLOPS, swigluDownGrads, swigluDownGradsUnfit } from '../../src/kernels/swiglu-down-grads.ts';
import { swigluDownGradsRef } from '../../src/reference/swiglu-down.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertEqual, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** [rows, inter, hidden]: the fixture draft's MLP (80, 176, 64), partial tiles every way, one tile. */
const SHAPES: readonly [number, number, number][] = [
  [80, 176, 64],
  [36, 44, 68],
  [8, 4, 4],
];

export default defineSuite('kernels/swiglu-down-grads', (t) => {
  t.test('dgu and dW against float64, and bit for bit the pair of products then swiglu backward', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const cpuSubgroups = ctx.record.isFallbackAdapter && ctx.hasFeature('subgroups') && (ctx.record.subgroupMinSize ?? 0) >= 8;
    let worst = 0;
    for (const [i, [R, I, H]] of SHAPES.entries()) {
      const shape = { rows: R, inter: I, hidden: H };
      const tag = `${R}x${I}x${H}`;
      const rng = new Rng(300 + i);
      const d = { gu: rng.floats(R * 2 * I, 3), w: rng.floats(H * I, 0.3), dy: rng.floats(R * H, 1), dw0: rng.floats(H * I, 1) };
      // Saturated gates: σ's limits, not NaN, in the store's SwiGLU backward too.
      for (let k = 5; k < d.gu.length; k += 29) d.gu[k] = k % 2 ? 100 : -100;
      const gu = gpu.upload([R, 2 * I], 'f32', d.gu, 'gu');
      const w = gpu.upload([H, I], 'f32', d.w, 'W');
      const dy = gpu.upload([R, H], 'f32', d.dy, 'dY');
      const act = gpu.tensor([R, I], 'f32', 'act');
      await swigluForwardPacked(gpu, gu, act, { rows: R, inter: I });
      const dgu = gpu.tensor([R, 2 * I], 'f32', 'dgu');
      const dw = gpu.upload([H, I], 'f32', d.dw0, 'dW');
      const ops = { dy, w, act, gu, dgu, dw };
      const unfit = swigluDownGradsUnfit(gpu, shape, ops);
      const before = gpu.batcher.stats.dispatches;
      await swigluDownGrads(gpu, ops, shape);
      // Unfused: the two products (two dispatches: the pair kernel has the same limits), swiglu's backward.
      assertEqual(gpu.batcher.stats.dispatches - before, unfit ? 3 : 1, `${tag}: dispatches (${unfit ?? 'fused'})`);
      const dAct = gpu.tensor([R, I], 'f32', 'dAct');
      const dgu2 = gpu.tensor([R, 2 * I], 'f32', 'dgu2');
      const dw2 = gpu.upload([H, I], 'f32', d.dw0, 'dW2');
      await linearGrads(gpu, { dy, w, x: act, dx: dAct, dw: dw2 }, { rows: R, inFeatures: I, outFeatures: H });
      await swigluBackwardPacked(gpu, gu, dAct, dgu2, { rows: R, inter: I });
      const [g1, g2, w1, w2] = await Promise.all([dgu, dgu2, dw, dw2].map((v) => gpu.read(v)));
      assert(sameBits(g1, g2) && sameBits(w1, w2), `${tag}: dgu and dW have the bits of the pair + swiglu's backward`);
      assert(g1.every(Number.isFinite), `${tag}: dgu finite with saturated gates`);
      const ref = swigluDownGradsRef(d.dy, d.w, d.gu, d.dw0, shape);
      worst = Math.max(worst, assertRelClose(g1, ref.dgu, 1e-5, `${tag}: dgu`), assertRelClose(w1, ref.dw, 1e-5, `${tag}: dW`));
      if (cpuSubgroups) assertEqual(unfit, undefined, `${tag}: one dispatch on a CPU adapter with 8-lane subgroups`);
      else note(`${tag} left to two commands`, unfit ?? '');
      gpu.release(gu, w, dy, act, dgu, dw, dAct, dgu2, dw2);
    }
    note('worst rel err', worst.toExponential(2));
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'every tensor released');
    gpu.destroy();
  });

  t.test(
    'the cases left to two commands are named: a width not a multiple of 4, a shared buffer, products past the launch-bound size',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const cpuSubgroups = ctx.record.isFallbackAdapter && ctx.hasFeature('subgroups') && (ctx.record.subgroupMinSize ?? 0) >= 8;
      const make = (R: number, I: number, H: number) => ({
        dy: gpu.tensor([R, H], 'f32', 'dY'),
        w: gpu.tensor([H, I], 'f32', 'W'),
        act: gpu.tensor([R, I], 'f32', 'act'),
        gu: gpu.tensor([R, 2 * I], 'f32', 'gu'),
        dgu: gpu.tensor([R, 2 * I], 'f32', 'dgu'),
        dw: gpu.tensor([H, I], 'f32', 'dW'),
      });
      const odd = make(8, 6, 4);
      const reason = swigluDownGradsUnfit(gpu, { rows: 8, inter: 6, hidden: 4 }, odd) ?? '';
      assert(/gradient runs matmul\/(subgroup|naive|blocked|tiled)\b/.test(reason), `inter = 6: ${reason}`);
      const shape = { rows: 8, inter: 8, hidden: 4 };
      const ops = make(8, 8, 4);
      assertEqual(
        swigluDownGradsUnfit(gpu, shape, ops) === undefined,
        cpuSubgroups,
        'distinct buffers fuse on a CPU adapter with subgroups',
      );
      assertEqual(
        swigluDownGradsUnfit(gpu, shape, { ...ops, dgu: ops.gu }),
        'dgu (gu) shares a GPU buffer with gu (gu)',
        'dgu written over gu',
      );
      // The lab draft's MLP: past the launch-bound size, so the two commands run.
      const lab = make(224, 512, 128);
      assertEqual(
        swigluDownGradsUnfit(gpu, { rows: 224, inter: 512, hidden: 128 }, lab),
        `the products' 58720256 FLOPs are past the launch-bound size the fused kernel is for (${SWIGLU_DOWN_FUSED_MAX_FLOPS})`,
        'a lab-sized MLP',
      );
      gpu.release(...Object.values(odd), ...Object.values(ops), ...Object.values(lab));
      gpu.destroy();
    },
  );
});
