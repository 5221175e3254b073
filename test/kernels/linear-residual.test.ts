/**
 * A linear layer and its residual add in one dispatch (src/kernels/linear-residual.ts): against
 * float64 at shapes with partial row and column tiles, bit for bit the copy and the matmul with
 * beta = 1 it replaces, one dispatch and no copy where the device runs matmul/subgroup-vec4, and the
 * cases it leaves to those two commands, each named.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { copyRows, elementView } from '../../src/gpu/tensor-views.ts';
import { linearForward } from '../../src/kernels/linear.ts';
import { linearForwardResidual, linearResidualUnfit } from '../../src/kernels/linear-residual.ts';
import { matmulRef } from '../../src/reference/matmul.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertEqual, assertRejects, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** [rows, in, out]: the fixture draft's down and o projections, partial tiles every way, one tile. */
const SHAPES: readonly [number, number, number][] = [
  [80, 176, 64],
  [80, 64, 64],
  [36, 44, 68],
  [8, 4, 4],
];

export default defineSuite('kernels/linear-residual', (t) => {
  t.test('y = x·Wᵀ + res against float64, and bit for bit the copy and the matmul it replaces', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const cpuSubgroups = ctx.record.isFallbackAdapter && ctx.hasFeature('subgroups') && (ctx.record.subgroupMinSize ?? 0) >= 8;
    let worst = 0;
    for (const [i, [R, inF, outF]] of SHAPES.entries()) {
      const shape = { rows: R, inFeatures: inF, outFeatures: outF };
      const tag = `${R}x${inF}x${outF}`;
      const rng = new Rng(400 + i);
      const d = { x: rng.floats(R * inF, 1), w: rng.floats(outF * inF, 0.3), res: rng.floats(R * outF, 1) };
      const x = gpu.upload([R, inF], 'f32', d.x, 'x');
      const w = gpu.upload([outF, inF], 'f32', d.w, 'W');
      const res = gpu.upload([R, outF], 'f32', d.res, 'res');
      // y starts as NaN: the fused kernel must never read it.
      const y = gpu.upload([R, outF], 'f32', new Float32Array(R * outF).fill(Number.NaN), 'y');
      const ops = { x, w, res, y };
      const unfit = linearResidualUnfit(gpu, shape, ops);
      const before = { ...gpu.batcher.stats };
      await linearForwardResidual(gpu, ops, shape);
      assertEqual(gpu.batcher.stats.dispatches - before.dispatches, 1, `${tag}: one dispatch (${unfit ?? 'fused'})`);
      assertEqual(gpu.batcher.stats.copies - before.copies, unfit ? 1 : 0, `${tag}: copies (${unfit ?? 'fused'})`);
      const y2 = gpu.tensor([R, outF], 'f32', 'y2');
      copyRows(gpu, res, 0, y2, 0, R);
      await linearForward(gpu, x, w, y2, shape, { beta: 1 });
      const [got, two] = await Promise.all([gpu.read(y), gpu.read(y2)]);
      assert(sameBits(got, two), `${tag}: the bits of the copy and the matmul`);
      const ref = matmulRef(d.x, d.w, d.res, { M: R, N: outF, K: inF, transB: true, beta: 1 });
      worst = Math.max(worst, assertRelClose(got, ref, 1e-5, `${tag}: y`));
      if (cpuSubgroups) assertEqual(unfit, undefined, `${tag}: one dispatch on a CPU adapter with 8-lane subgroups`);
      else note(`${tag} left to the copy and the matmul`, unfit ?? '');
      gpu.release(x, w, res, y, y2);
    }
    note('worst rel err', worst.toExponential(2));
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'every tensor released');
    gpu.destroy();
  });

  t.test(
    'the cases left to the copy and the matmul are named (a width not a multiple of 4, an f16 weight); a shared written buffer is refused',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const cpuSubgroups = ctx.record.isFallbackAdapter && ctx.hasFeature('subgroups') && (ctx.record.subgroupMinSize ?? 0) >= 8;
      const odd = { rows: 8, inFeatures: 6, outFeatures: 4 };
      const o = {
        x: gpu.tensor([8, 6], 'f32', 'x6'),
        w: gpu.tensor([4, 6], 'f32', 'W6'),
        res: gpu.tensor([8, 4], 'f32', 'res'),
        y: gpu.tensor([8, 4], 'f32', 'y'),
      };
      const reason = linearResidualUnfit(gpu, odd, o) ?? '';
      assert(/product runs matmul\/(subgroup|naive|blocked|tiled)\b/.test(reason), `in = 6: ${reason}`);
      const shape = { rows: 8, inFeatures: 8, outFeatures: 4 };
      const ops = { x: gpu.tensor([8, 8], 'f32', 'x'), w: gpu.tensor([4, 8], 'f32', 'W'), res: o.res, y: o.y };
      assertEqual(
        linearResidualUnfit(gpu, shape, ops) === undefined,
        cpuSubgroups,
        'distinct f32 buffers fuse on a CPU adapter with subgroups',
      );
      const wHalf = gpu.tensor([4, 8], 'f16', 'W.f16');
      assertEqual(linearResidualUnfit(gpu, shape, { ...ops, w: wHalf }), 'W (W.f16) is f16', 'an f16 weight');
      const both = gpu.tensor([128], 'f32', 'res+y');
      const resView = elementView(gpu, both, 0, 32, 'res.view', [8, 4]);
      const yView = elementView(gpu, both, 64, 32, 'y.view', [8, 4]); // 256 bytes in: every adapter's offset alignment
      await assertRejects(
        () => linearForwardResidual(gpu, { ...ops, res: resView, y: yView }, shape),
        /^linearForwardResidual: y \(y\.view\) shares a GPU buffer with res \(res\.view\)/,
        'res and y in one buffer, refused on every path',
      );
      gpu.release(o.x, o.w, o.res, o.y, ops.x, ops.w, wHalf, both);
      gpu.destroy();
    },
  );
});
