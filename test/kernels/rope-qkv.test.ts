/**
 * RoPE on a stacked q | k | v row (src/kernels/rope-qkv.ts): the split against the float64 rotation
 * of its q and k heads (v copied exactly), the join against the float64 backward (the rotation by
 * −angle) with dv copied exactly, both bit-identical to the rope/table and copy/strided dispatches
 * they replace, one dispatch each, and operands that alias refused.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { copyStrided } from '../../src/kernels/copy-strided.ts';
import { ropeQkvJoin, ropeQkvSplit } from '../../src/kernels/rope-qkv.ts';
import { buildRopeTable, inverseRopeTable, ropeTableForward } from '../../src/kernels/rope-table.ts';
import { ropeBackwardRef, ropeForwardRef } from '../../src/reference/rope.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertRejects, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

// 3 q heads, 2 k/v heads of 10 (an odd number of pairs per head), 29 rows at TTT step 2.
const [ROWS, QH, KVH, HD, THETA, STEP] = [29, 3, 2, 10, 10000, 2];
const [QD, KVD] = [QH * HD, KVH * HD];
const W = QD + 2 * KVD;

/** Columns [from, from + width) of each row of a [ROWS, stride] array. */
const columns = (a: ArrayLike<number>, stride: number, from: number, width: number) =>
  Float32Array.from({ length: ROWS * width }, (_, e) => a[Math.floor(e / width) * stride + from + (e % width)]);

/** The three dense parts side by side in rows of W. */
function stack(q: Float32Array, k: Float32Array, v: Float32Array): Float32Array {
  const out = new Float32Array(ROWS * W);
  for (let r = 0; r < ROWS; r++) {
    out.set(q.subarray(r * QD, (r + 1) * QD), r * W);
    out.set(k.subarray(r * KVD, (r + 1) * KVD), r * W + QD);
    out.set(v.subarray(r * KVD, (r + 1) * KVD), r * W + QD + KVD);
  }
  return out;
}

export default defineSuite('kernels/rope-qkv', (t) => {
  t.test(
    'split and join vs float64 (q and k rotated, v copied), the same bits as rope/table + copy/strided',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(31);
      const base = Int32Array.from({ length: ROWS }, (_, r) => r % 17);
      const table = buildRopeTable({ headDim: HD, ropeTheta: THETA, ropeScaling: { type: 'default' } }, 64);
      const positions = gpu.upload(
        [ROWS],
        'i32',
        base.map((p) => p + STEP),
        'positions',
      );
      const forward = gpu.upload([64, HD / 2, 2], 'f32', table, 'table');
      const inverse = gpu.upload([64, HD / 2, 2], 'f32', inverseRopeTable(table), 'inverse');
      const refArgs = (heads: number) => ({ rows: ROWS, nHeads: heads, headDim: HD, theta: THETA, posOffset: STEP });
      const parts = (tag: string) => ({
        q: gpu.tensor([ROWS, QD], 'f32', `${tag}.q`),
        k: gpu.tensor([ROWS, KVD], 'f32', `${tag}.k`),
        v: gpu.tensor([ROWS, KVD], 'f32', `${tag}.v`),
      });
      const args = { rows: ROWS, qHeads: QH, kvHeads: KVH, headDim: HD };

      // Split.
      const x = rng.floats(ROWS * W, 1.5);
      const qkv = gpu.upload([ROWS, W], 'f32', x, 'qkv');
      const out = parts('split');
      const before = gpu.batcher.stats.dispatches;
      await ropeQkvSplit(gpu, qkv, positions, forward, out, args);
      assert(gpu.batcher.stats.dispatches === before + 1, 'the split is one dispatch');
      const [q, k, v] = [await gpu.read(out.q), await gpu.read(out.k), await gpu.read(out.v)];
      let worst = assertRelClose(q, ropeForwardRef(columns(x, W, 0, QD), base, refArgs(QH)), 1e-5, 'split q');
      worst = Math.max(worst, assertRelClose(k, ropeForwardRef(columns(x, W, QD, KVD), base, refArgs(KVH)), 1e-5, 'split k'));
      assert(sameBits(v, columns(x, W, QD + KVD, KVD)), 'split v is copied exactly');
      // The dispatches it replaces: rope/table on the strided q and k heads, copy/strided for v.
      const old = parts('old');
      await ropeTableForward(gpu, qkv, positions, forward, old.q, { rows: ROWS, nHeads: QH, headDim: HD, strideX: W, offsetX: 0 });
      await ropeTableForward(gpu, qkv, positions, forward, old.k, { rows: ROWS, nHeads: KVH, headDim: HD, strideX: W, offsetX: QD });
      await copyStrided(gpu, qkv, old.v, { rows: ROWS, width: KVD, srcStride: W, srcOffset: QD + KVD });
      for (const name of ['q', 'k', 'v'] as const)
        assert(sameBits(await gpu.read(old[name]), await gpu.read(out[name])), `split ${name}: the bits of the three dispatches`);

      // Join.
      const d = { q: rng.floats(ROWS * QD, 1.5), k: rng.floats(ROWS * KVD, 1.5), v: rng.floats(ROWS * KVD, 1.5) };
      const grads = {
        q: gpu.upload([ROWS, QD], 'f32', d.q, 'dq'),
        k: gpu.upload([ROWS, KVD], 'f32', d.k, 'dk'),
        v: gpu.upload([ROWS, KVD], 'f32', d.v, 'dv'),
      };
      const dqkv = gpu.upload([ROWS, W], 'f32', rng.floats(ROWS * W, 9), 'dqkv'); // every element must be overwritten
      const mid = gpu.batcher.stats.dispatches;
      await ropeQkvJoin(gpu, grads, positions, inverse, dqkv, args);
      assert(gpu.batcher.stats.dispatches === mid + 1, 'the join is one dispatch');
      const got = await gpu.read(dqkv);
      const want = stack(
        Float32Array.from(ropeBackwardRef(d.q, base, refArgs(QH))),
        Float32Array.from(ropeBackwardRef(d.k, base, refArgs(KVH))),
        d.v,
      );
      worst = Math.max(worst, assertRelClose(got, want, 1e-5, 'join'));
      assert(sameBits(columns(got, W, QD + KVD, KVD), d.v), 'join dv is copied exactly');
      const oldJoin = gpu.tensor([ROWS, W], 'f32', 'old.dqkv');
      await ropeTableForward(gpu, grads.q, positions, inverse, oldJoin, { rows: ROWS, nHeads: QH, headDim: HD, strideY: W, offsetY: 0 });
      await ropeTableForward(gpu, grads.k, positions, inverse, oldJoin, { rows: ROWS, nHeads: KVH, headDim: HD, strideY: W, offsetY: QD });
      await copyStrided(gpu, grads.v, oldJoin, { rows: ROWS, width: KVD, dstStride: W, dstOffset: QD + KVD });
      assert(sameBits(await gpu.read(oldJoin), got), 'join: the bits of the three dispatches');
      note('worstRelErr', worst);
      gpu.release(positions, forward, inverse, qkv, ...Object.values(out), ...Object.values(old), ...Object.values(grads), dqkv, oldJoin);
      gpu.destroy();
    },
  );

  t.test('aliased, short or odd-headed operands are refused naming the operand', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const table = gpu.upload(
      [64, HD / 2, 2],
      'f32',
      buildRopeTable({ headDim: HD, ropeTheta: THETA, ropeScaling: { type: 'default' } }, 64),
      'table',
    );
    const positions = gpu.upload([ROWS], 'i32', new Int32Array(ROWS), 'positions');
    const qkv = gpu.tensor([ROWS, W], 'f32', 'qkv');
    const [q, k, v] = [gpu.tensor([ROWS, QD], 'f32', 'q'), gpu.tensor([ROWS, KVD], 'f32', 'k'), gpu.tensor([ROWS, KVD], 'f32', 'v')];
    const args = { rows: ROWS, qHeads: QH, kvHeads: KVH, headDim: HD };
    await assertRejects(
      () => ropeQkvSplit(gpu, qkv, positions, table, { q, k, v: k }, args),
      /ropeQkvSplit: k \(k\) shares a GPU buffer with v/,
      'k = v',
    );
    await assertRejects(
      () => ropeQkvSplit(gpu, q, positions, table, { q, k, v }, args),
      /ropeQkvSplit: qkv \(q \[29, 30\]\) has 870 elements, needs at least 2030/,
      'qkv too short',
    );
    await assertRejects(
      () => ropeQkvJoin(gpu, { q, k, v }, positions, table, v, args),
      /ropeQkvJoin: dqkv \(v \[29, 20\]\) has 580 elements/,
      'dqkv too short',
    );
    await assertRejects(
      () => ropeQkvJoin(gpu, { q, k, v }, positions, table, qkv, { ...args, headDim: 9 }),
      /ropeQkvJoin: headDim must be even, got 9/,
      'odd head',
    );
    gpu.release(table, positions, qkv, q, k, v);
    gpu.destroy();
  });
});
