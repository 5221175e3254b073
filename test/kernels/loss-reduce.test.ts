/**
 * The deterministic reduction (src/kernels/loss-reduce.ts, shaders/loss/reduce.wgsl): column sums of
 * row-major and strided tables against float64, the weighted total over more columns than one
 * dispatch weighs (carried from dispatch to dispatch), the bits of one reduceColumns per column and
 * per total term (what the EAGLE3 step did before it reduced all its steps at once), and bad
 * arguments refused by name.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { MAX_REDUCE_WEIGHTS, reduceColumns, reduceTable } from '../../src/kernels/loss-reduce.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertRejects, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('kernels/loss-reduce', (t) => {
  t.test(
    'strided table with a weighted total vs float64, and the bits of one reduction per column and per total term',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(41);
      let worst = 0;
      // 5 columns (one dispatch) and MAX + 3 (two dispatches, the total carried), 300 rows (past 256 lanes).
      for (const cols of [5, MAX_REDUCE_WEIGHTS + 3]) {
        const [rows, stride] = [300, 320];
        const table = rng.floats(cols * stride, 2); // column c's rows at [c · stride, c · stride + rows)
        const weights = Array.from({ length: cols }, (_, c) => 0.8 ** c / rows);
        const input = gpu.upload([cols, stride], 'f32', table, 'table');
        const out = gpu.zeros([cols + 1], 'f32', 'out');
        const before = gpu.batcher.stats.dispatches;
        await reduceTable(gpu, input, out, {
          rows,
          cols,
          rowStride: 1,
          colStride: stride,
          outOffset: 0,
          scale: 1 / rows,
          total: { offset: cols, weights },
        });
        assert(
          gpu.batcher.stats.dispatches - before === Math.ceil(cols / MAX_REDUCE_WEIGHTS),
          `${cols} columns: one dispatch per ${MAX_REDUCE_WEIGHTS}`,
        );
        const got = await gpu.read(out);
        const sums = Array.from({ length: cols }, (_, c) => table.subarray(c * stride, c * stride + rows).reduce((s, v) => s + v, 0));
        const want = [...sums.map((s) => s / rows), sums.reduce((s, v, c) => s + weights[c] * v, 0)];
        worst = Math.max(worst, assertRelClose(got, want, 1e-5, `${cols} columns`));

        // One reduction per column, and per total term (accumulating after the first): the same bits.
        const one = gpu.zeros([cols + 1], 'f32', 'one');
        for (let c = 0; c < cols; c++) {
          const column = gpu.upload([rows], 'f32', table.subarray(c * stride, c * stride + rows), 'column');
          await reduceColumns(gpu, column, one, { rows, cols: 1, outOffset: c, scale: 1 / rows });
          await reduceColumns(gpu, column, one, { rows, cols: 1, outOffset: cols, scale: weights[c], accumulate: c > 0 });
          gpu.release(column);
        }
        assert(sameBits(got, await gpu.read(one)), `${cols} columns: the bits of one reduction per column and total term`);
        gpu.release(input, out, one);
      }
      // Row-major [rows, cols] with accumulate: out += column sums.
      const [rows, cols] = [37, 4];
      const table = rng.floats(rows * cols, 1);
      const input = gpu.upload([rows, cols], 'f32', table, 'row-major');
      const out = gpu.upload([6], 'f32', [1, 2, 3, 4, 5, 6], 'out');
      await reduceColumns(gpu, input, out, { rows, cols, outOffset: 1, accumulate: true });
      const want = [
        1,
        ...Array.from(
          { length: cols },
          (_, c) => 2 + c + Array.from({ length: rows }, (_, r) => table[r * cols + c]).reduce((s, v) => s + v, 0),
        ),
        6,
      ];
      worst = Math.max(worst, assertRelClose(await gpu.read(out), want, 1e-5, 'row-major, accumulate'));
      note('worstRelErr', worst);
      gpu.release(input, out);
      gpu.destroy();
    },
  );

  t.test(
    'groups: several [rows, 4] tables at a stride in one dispatch, the bits of one reduceColumns per table',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(43);
      // Four TTT steps' metric terms of 300 rows (past 256 lanes), each table on a 256-byte boundary.
      const [groups, rows, inStride] = [4, 300, 1216];
      const table = rng.floats(groups * inStride, 3);
      const input = gpu.upload([groups, inStride], 'f32', table, 'rowStats');
      const out = gpu.upload([4 * groups + 1], 'f32', new Float32Array(4 * groups + 1).fill(7), 'metrics');
      const before = gpu.batcher.stats.dispatches;
      const shape = { rows, cols: 4, rowStride: 4, colStride: 1, outOffset: 0 };
      await reduceTable(gpu, input, out, { ...shape, groups: { count: groups, inStride, outStride: 4 } });
      assert(gpu.batcher.stats.dispatches - before === 1, 'one dispatch');
      const got = await gpu.read(out);
      const want = Array.from({ length: 4 * groups + 1 }, (_, i) => {
        if (i === 4 * groups) return 7;
        const [g, c] = [Math.floor(i / 4), i % 4];
        return Array.from({ length: rows }, (_, r) => table[g * inStride + 4 * r + c]).reduce((a, v) => a + v, 0);
      });
      note('relErr', assertRelClose(got, want, 1e-5, 'groups vs float64 (the element past them untouched)'));
      const one = gpu.tensor([4 * groups + 1], 'f32', 'one');
      for (let g = 0; g < groups; g++) {
        const rowStats = gpu.upload([rows, 4], 'f32', table.subarray(g * inStride, g * inStride + 4 * rows), 'step');
        await reduceColumns(gpu, rowStats, one, { rows, cols: 4, outOffset: 4 * g });
        gpu.release(rowStats);
      }
      assert(sameBits(got.subarray(0, 4 * groups), (await gpu.read(one)).subarray(0, 4 * groups)), 'the bits of one reduction per table');
      await assertRejects(
        () => reduceTable(gpu, input, out, { ...shape, groups: { count: groups, inStride, outStride: 5 } }),
        /reduceTable: out \(metrics \[17\]\) cannot hold 4 × 4 values from offset 0/,
        'out too short',
      );
      await assertRejects(
        () =>
          reduceTable(gpu, input, out, {
            ...shape,
            groups: { count: 2, inStride, outStride: 4 },
            total: { offset: 16, weights: [1, 1, 1, 1] },
          }),
        /reduceTable: a weighted total sums one table's columns; it cannot take groups \(2\)/,
        'total with groups',
      );
      gpu.release(input, out, one);
      gpu.destroy();
    },
  );

  t.test('a total among the sums, a weight per column missing, or a table too short are refused by name', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const input = gpu.tensor([3, 64], 'f32', 'table');
    const out = gpu.tensor([4], 'f32', 'out');
    const base = { rows: 60, cols: 3, rowStride: 1, colStride: 64, outOffset: 0 };
    await assertRejects(
      () => reduceTable(gpu, input, out, { ...base, total: { offset: 1, weights: [1, 1, 1] } }),
      /reduceTable: the total at 1 falls among the column sums at \[0, 3\)/,
      'total inside',
    );
    await assertRejects(
      () => reduceTable(gpu, input, out, { ...base, total: { offset: 3, weights: [1] } }),
      /reduceTable: total.weights has 1 entries, one per column needs 3/,
      'weights',
    );
    await assertRejects(
      () => reduceTable(gpu, input, out, { ...base, rows: 65 }),
      /reduceTable: input \(table \[3, 64\]\) has 192 elements, rows × cols needs 193/,
      'short',
    );
    await assertRejects(() => reduceTable(gpu, input, input, base), /reduceTable: input and out share a GPU buffer/, 'aliasing');
    gpu.release(input, out);
    gpu.destroy();
  });
});
