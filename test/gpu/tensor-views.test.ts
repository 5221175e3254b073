/**
 * Tensor layouts and the copies between them (src/gpu/tensor.ts, tensor-views.ts, Gpu.copyInto):
 * a [B, S, V] tensor whose [S, V] slab exceeds a binding is split over its B·S rows, and row and
 * element copies, row clears and copyInto move the right bytes between tensors split anywhere
 * (different limits, different leading dimensions), checked against the same copies on host arrays;
 * views: a slot viewed in place only where it starts on a binding boundary, and matrices stacked only
 * where they lie back to back.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import type { GpuContext } from '../../src/gpu/context.ts';
import { planTensorLayout } from '../../src/gpu/tensor.ts';
import { clearRows, copyElements, copyRows, stackedRows, viewIfAligned } from '../../src/gpu/tensor-views.ts';
import { allocateArena } from '../../src/optim/parameter-arena.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** A Gpu whose tensors split at `limit` bytes (the device keeps its real limit); `setLimit` changes it. */
function lowered(ctx: GpuContext, limit: number): Gpu {
  const gpu = new Gpu(ctx);
  setLimit(gpu, limit);
  return gpu;
}

function setLimit(gpu: Gpu, limit: number): void {
  Object.defineProperty(gpu, 'maxBindingBytes', { value: limit, configurable: true });
}

export default defineSuite('gpu/tensor-views', (t) => {
  t.test('layout: rows of the outermost dimension while one fits a binding, else of the first two, never of the innermost', () => {
    // [4, 3, 10] f32: a [3, 10] slab is 120 bytes, a row of 10 is 40.
    assertDeepEqual(planTensorLayout([4, 3, 10], 'f32', 1 << 20), { splitDims: 1, counts: [4] }, 'fits whole');
    assertDeepEqual(planTensorLayout([4, 3, 10], 'f32', 250), { splitDims: 1, counts: [2, 2] }, 'split by B');
    assertDeepEqual(planTensorLayout([4, 3, 10], 'f32', 100), { splitDims: 2, counts: [2, 2, 2, 2, 2, 2] }, 'split over B·S rows');
    assertThrows(() => planTensorLayout([4, 3, 10], 'f32', 30), /one row of \[4, 3, 10\] f32 is 40 bytes/, 'a row of V too large');
    assertDeepEqual(planTensorLayout([10], 'f32', 16), { splitDims: 1, counts: [4, 4, 2] }, 'a vector splits by elements');
    assertThrows(() => planTensorLayout([2, 100], 'f32', 256), /binding limit 256/, 'a 2-D row larger than a binding');
  });

  t.test(
    'a [B, S, V] tensor split over B·S rows round-trips, and copies between any two splits move the right elements',
    async ({ gpu: ctx }) => {
      const rng = new Rng(5);
      const [B, S, V] = [3, 5, 6];
      const values = rng.floats(B * S * V, 1);
      const gpu = lowered(ctx, 64); // rows of 6 f32 (24 bytes): two per part
      try {
        const split = gpu.upload([B, S, V], 'f32', values, 'split');
        assertEqual(split.splitDims, 2, 'split over B·S');
        assertEqual(split.rows, B * S, 'counted in B·S rows');
        assertEqual(split.parts.length, 8, '15 rows, 2 per part');
        assert(sameBits(await gpu.read(split), values), 'round trip');

        // Rows 3..12 of the split tensor into rows 1..10 of a [B·S, V] tensor split at another limit.
        setLimit(gpu, 100);
        const dst = gpu.zeros([B * S, V], 'f32', 'dst');
        assert(dst.parts.length > 1 && dst.parts[0].rowCount !== split.parts[0].rowCount, 'split at other rows');
        copyRows(gpu, split, 3, dst, 1, 10);
        clearRows(gpu, dst, 5, 2);
        const want = new Float32Array(B * S * V);
        want.set(values.subarray(3 * V, 13 * V), V);
        want.fill(0, 5 * V, 7 * V);
        assert(sameBits(await gpu.read(dst), want), 'copyRows then clearRows');

        // An element range that starts and ends inside rows, into an unsplit vector.
        setLimit(gpu, 1 << 20);
        const flat = gpu.zeros([B * S * V], 'f32', 'flat');
        copyElements(gpu, split, 7, flat, 11, 50);
        const wantFlat = new Float32Array(B * S * V);
        wantFlat.set(values.subarray(7, 57), 11);
        assert(sameBits(await gpu.read(flat), wantFlat), 'copyElements across parts');

        // copyInto: a whole sample into the second sequence of a batch split over its rows.
        const sample = gpu.upload([S, V], 'f32', values.subarray(0, S * V), 'sample');
        setLimit(gpu, 64);
        const batch = gpu.zeros([B, S, V], 'f32', 'batch');
        gpu.copyInto(sample, batch, S * V * 4);
        const wantBatch = new Float32Array(B * S * V);
        wantBatch.set(values.subarray(0, S * V), S * V);
        assert(sameBits(await gpu.read(batch), wantBatch), 'copyInto a split batch at an offset');
        gpu.release(split, dst, flat, sample, batch);
        assertEqual(gpu.pool.stats().liveBuffers, 0, 'nothing leaked');
      } finally {
        gpu.destroy();
      }
    },
  );

  t.test('copies refuse what they cannot do, naming the tensors', ({ gpu: ctx }) => {
    const gpu = lowered(ctx, 64);
    try {
      const a = gpu.tensor([4, 6], 'f32', 'a');
      const b = gpu.tensor([4, 5], 'f32', 'b');
      const h = gpu.tensor([4, 3], 'f16', 'h');
      assertThrows(() => copyRows(gpu, a, 0, b, 0, 1), /rows of a \[4, 6\] and b \[4, 5\] differ in width/, 'widths');
      assertThrows(() => copyRows(gpu, a, 3, a, 0, 2), /outside a \[4, 6\]|aliases/, 'range or alias');
      assertThrows(() => copyElements(gpu, h, 1, h, 5, 3), /not whole 4-byte words|aliases/, 'odd f16 words');
      assertThrows(() => clearRows(gpu, a, 3, 2), /rows \[3, 5\) are outside a \[4, 6\]/, 'clear range');
      gpu.release(a, b, h);
    } finally {
      gpu.destroy();
    }
  });

  t.test(
    'views: viewIfAligned only on a binding boundary of one buffer; stackedRows only over back-to-back matrices',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      try {
        const align = (ctx.limits.minStorageBufferOffsetAlignment ?? 256) / 4;
        const cache = gpu.upload(
          [4 * align],
          'f32',
          Float32Array.from({ length: 4 * align }, (_, i) => i),
          'cache',
        );
        const slot = viewIfAligned(gpu, cache, 2 * align, align, 'slot');
        assert(slot !== undefined, 'a slot on the boundary is viewed');
        assertDeepEqual(
          Array.from(await gpu.read(slot!)),
          Array.from({ length: align }, (_, i) => 2 * align + i),
          'the slot reads its own elements',
        );
        assertEqual(viewIfAligned(gpu, cache, align + 2, align, 'off'), undefined, 'off the boundary: no view');
        const split = lowered(ctx, 64);
        const parts = split.tensor([8, 4], 'f32', 'parts');
        assert(parts.parts.length > 1, 'the tensor is split');
        assertEqual(viewIfAligned(split, parts, 0, 4, 'split'), undefined, 'a split tensor: no view');
        split.release(parts);
        split.destroy();

        // An arena places [16, 16] f32 matrices (1 KiB) back to back; a [3, 16] one (192 bytes) leaves a gap.
        const init = (rows: number) => new Float32Array(rows * 16).fill(rows);
        const { params, slabs } = allocateArena(gpu, [
          { name: 'a', shape: [16, 16], init: init(16) },
          { name: 'b', shape: [16, 16], init: init(16) },
          { name: 'c', shape: [3, 16], init: init(3) },
          { name: 'd', shape: [16, 16], init: init(16) },
        ]);
        const [a, b, c, d] = params.map((p) => p.value);
        const ab = stackedRows([a, b], 'ab');
        assertDeepEqual(ab?.shape, [32, 16], 'a and b stack into [32, 16]');
        assert(sameBits(await gpu.read(ab!), new Float32Array(32 * 16).fill(16)), 'the stack reads a then b');
        assertDeepEqual(stackedRows([a, b, c], 'abc')?.shape, [35, 16], 'c follows b directly');
        assertEqual(stackedRows([c, d], 'cd'), undefined, 'd starts after a gap: no stack');
        assertEqual(stackedRows([b, a], 'ba'), undefined, 'out of order: no stack');
        const narrow = gpu.tensor([16, 8], 'f32', 'narrow');
        assertEqual(stackedRows([a, narrow], 'mixed'), undefined, 'different widths: no stack');
        gpu.release(narrow);
        for (const slab of slabs) gpu.release(slab.value, slab.grad, slab.m, slab.v);
        gpu.release(cache);
      } finally {
        gpu.destroy();
      }
    },
  );
});
