/**
 * Both gradients of a linear layer at once (src/kernels/linear-grads.ts): against float64, with alpha
 * and both betas, at shapes whose two problems cover different numbers of row tiles; bit for bit the
 * two one-problem calls it replaces (linearInputGrad then linearWeightGrad), in one dispatch where the
 * device runs matmul/subgroup-vec4; and the cases it hands to those two calls, each named.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import { elementView } from '../../src/gpu/tensor-views.ts';
import { linearInputGrad, linearWeightGrad, type LinearShape } from '../../src/kernels/linear.ts';
import { linearGrads, linearGradsPairUnfit } from '../../src/kernels/linear-grads.ts';
import { matmulRef } from '../../src/reference/matmul.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertEqual, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const TOL = 1e-5;

/** [rows, in, out]: R > out, out > R, one tile, and several tiles ending in partial ones. */
const SHAPES: readonly [number, number, number][] = [
  [80, 64, 352],
  [100, 44, 36],
  [8, 4, 4],
  [36, 132, 68],
];

interface Case {
  dy: Tensor;
  w: Tensor;
  x: Tensor;
  dx: Tensor;
  dw: Tensor;
}

function upload(gpu: Gpu, shape: LinearShape, seed: number) {
  const { rows: R, inFeatures: inF, outFeatures: outF } = shape;
  const rng = new Rng(seed);
  const d = {
    dy: rng.floats(R * outF, 1),
    w: rng.floats(outF * inF, 0.5),
    x: rng.floats(R * inF, 1),
    dx0: rng.floats(R * inF, 1),
    dw0: rng.floats(outF * inF, 1),
  };
  const make = (): Case => ({
    dy: gpu.upload([R, outF], 'f32', d.dy, 'dy'),
    w: gpu.upload([outF, inF], 'f32', d.w, 'W'),
    x: gpu.upload([R, inF], 'f32', d.x, 'x'),
    dx: gpu.upload([R, inF], 'f32', d.dx0, 'dx'),
    dw: gpu.upload([outF, inF], 'f32', d.dw0, 'dW'),
  });
  return { d, make };
}

const release = (gpu: Gpu, c: Case) => gpu.release(c.dy, c.w, c.x, c.dx, c.dw);

export default defineSuite('kernels/linear-grads', (t) => {
  t.test('dx and dW against float64 (alpha, beta 0 and 1), and bit for bit the two one-problem calls', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    let worst = 0;
    let paired = 0;
    for (const [i, [R, inF, outF]] of SHAPES.entries()) {
      const shape = { rows: R, inFeatures: inF, outFeatures: outF };
      for (const [alpha, betaX, betaW] of [
        [1, 0, 1],
        [0.5, 1, 0],
      ] as const) {
        const tag = `${R}x${inF}x${outF} alpha ${alpha} betaX ${betaX} betaW ${betaW}`;
        const { d, make } = upload(gpu, shape, 100 + i);
        const pair = make();
        const unfit = linearGradsPairUnfit(gpu, shape, pair);
        const before = gpu.batcher.stats.dispatches;
        await linearGrads(gpu, pair, shape, { alpha, betaX, betaW });
        const dispatched = gpu.batcher.stats.dispatches - before;
        assertEqual(dispatched, unfit ? 2 : 1, `${tag}: dispatches (${unfit ?? 'paired'})`);
        if (!unfit) paired++;
        else note('left to two calls', unfit);
        const two = make();
        await linearInputGrad(gpu, two.dy, two.w, two.dx, shape, { alpha, beta: betaX });
        await linearWeightGrad(gpu, two.dy, two.x, two.dw, shape, { alpha, beta: betaW });
        const [dx, dw, dx2, dw2] = await Promise.all([pair.dx, pair.dw, two.dx, two.dw].map((v) => gpu.read(v)));
        assert(sameBits(dx, dx2) && sameBits(dw, dw2), `${tag}: the bits of linearInputGrad + linearWeightGrad`);
        const refDx = matmulRef(d.dy, d.w, betaX ? d.dx0 : undefined, { M: R, N: inF, K: outF, alpha, beta: betaX });
        const refDw = matmulRef(d.dy, d.x, betaW ? d.dw0 : undefined, { M: outF, N: inF, K: R, transA: true, alpha, beta: betaW });
        worst = Math.max(worst, assertRelClose(dx, refDx, TOL, `${tag}: dx`), assertRelClose(dw, refDw, TOL, `${tag}: dW`));
        release(gpu, pair);
        release(gpu, two);
      }
    }
    // A device with 8-lane subgroups runs every one of these shapes as a pair; one without runs two matmuls.
    const subgroups = ctx.hasFeature('subgroups') && (ctx.record.subgroupMinSize ?? 0) >= 8;
    if (subgroups && ctx.record.isFallbackAdapter)
      assertEqual(paired, 2 * SHAPES.length, 'every case paired on a CPU adapter with subgroups');
    note('paired cases', `${paired} of ${2 * SHAPES.length}`);
    note('worst rel err', worst.toExponential(2));
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'every tensor released');
    gpu.destroy();
  });

  t.test('the cases left to two calls are named: a width not a multiple of 4, an f16 weight, a shared buffer', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const subgroups = ctx.record.isFallbackAdapter && ctx.hasFeature('subgroups') && (ctx.record.subgroupMinSize ?? 0) >= 8;
    const odd = { rows: 8, inFeatures: 6, outFeatures: 4 };
    const c = upload(gpu, odd, 7).make();
    const reason = linearGradsPairUnfit(gpu, odd, c) ?? '';
    assert(/gradient runs matmul\/(subgroup|naive|blocked|tiled)\b/.test(reason), `in = 6: ${reason}`);
    release(gpu, c);
    const shape = { rows: 8, inFeatures: 8, outFeatures: 4 };
    const ops = upload(gpu, shape, 8).make();
    const wHalf = gpu.tensor([4, 8], 'f16', 'W.f16');
    assertEqual(linearGradsPairUnfit(gpu, shape, { ...ops, w: wHalf }), 'W (W.f16) is f16', 'an f16 weight');
    const shared = gpu.tensor([8 * 8 + 4 * 8], 'f32', 'dx+dW');
    const dxView = elementView(gpu, shared, 0, 64, 'dx.view', [8, 8]);
    const dwView = elementView(gpu, shared, 64, 32, 'dW.view', [4, 8]);
    const alias = linearGradsPairUnfit(gpu, shape, { ...ops, dx: dxView, dw: dwView });
    assertEqual(alias, 'dx (dx.view) shares a GPU buffer with dW (dW.view)', 'dx and dW in one buffer');
    const square = { rows: 8, inFeatures: 8, outFeatures: 8 };
    const sq = upload(gpu, square, 9).make();
    assertEqual(
      linearGradsPairUnfit(gpu, square, { ...sq, dx: sq.x }),
      'dx (x) shares a GPU buffer with x (x)',
      'one tensor passed as x and dx',
    );
    release(gpu, sq);
    // The same shape with its own buffers pairs wherever 8-lane subgroups run matmul/subgroup-vec4.
    assertEqual(linearGradsPairUnfit(gpu, shape, ops) === undefined, subgroups, 'distinct buffers pair on a CPU adapter with subgroups');
    gpu.release(wHalf, shared, ops.dy, ops.w, ops.x, ops.dx, ops.dw);
    gpu.destroy();
  });
});
