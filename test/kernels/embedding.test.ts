import { Gpu } from '../../src/gpu/gpu.ts';
import { Tensor, type TensorPart } from '../../src/gpu/tensor.ts';
import { embeddingBackward, embeddingForward } from '../../src/kernels/embedding.ts';
import { embeddingBackwardRef, embeddingForwardRef } from '../../src/reference/embedding.ts';
import { shiftRowsRef } from '../../src/reference/loss.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** Ids with many repeats (a small hot range), plus padding ids outside [0, vocab). */
function makeIds(rng: Rng, n: number, vocab: number): Int32Array {
  const ids = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const r = rng.next();
    ids[i] = r < 0.05 ? -1 : r < 0.08 ? vocab : r < 0.6 ? rng.int(0, Math.min(5, vocab)) : rng.int(0, vocab);
  }
  return ids;
}

/** A [rows, hidden] f32 tensor split into row parts, as gpu.tensor does for tables over one binding. */
function chunkedTable(gpu: Gpu, partRows: number[], hidden: number, label: string): Tensor {
  const parts: TensorPart[] = [];
  let rowStart = 0;
  for (const rowCount of partRows) {
    const piece = gpu.tensor([rowCount, hidden], 'f32', label);
    parts.push({ ...piece.part, rowStart, rowCount });
    rowStart += rowCount;
  }
  return new Tensor([rowStart, hidden], 'f32', parts, label);
}

const SHAPES = [
  { n: 1, vocab: 1, hidden: 1 },
  { n: 101, vocab: 37, hidden: 53 },
  { n: 300, vocab: 7, hidden: 19 },
  { n: 517, vocab: 130, hidden: 64 },
];

export default defineSuite('kernels/embedding', (t) => {
  t.test('forward gathers rows, zero rows for padding ids', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(11);
    let worst = 0;
    for (const shape of SHAPES) {
      const ids = makeIds(rng, shape.n, shape.vocab);
      const table = rng.floats(shape.vocab * shape.hidden);
      const Ids = gpu.upload([shape.n], 'i32', ids, 'ids');
      const Table = gpu.upload([shape.vocab, shape.hidden], 'f32', table, 'table');
      const Out = gpu.upload([shape.n, shape.hidden], 'f32', new Float32Array(shape.n * shape.hidden).fill(Number.NaN), 'out');
      await embeddingForward(gpu, Ids, Table, Out, shape);
      const want = embeddingForwardRef(table, ids, shape);
      worst = Math.max(worst, assertRelClose(await gpu.read(Out), want, 1e-5, `forward ${JSON.stringify(shape)}`));
      gpu.release(Ids, Table, Out);
    }
    note('worstRelErr', worst);
    gpu.destroy();
  });

  t.test('forward with shifted ids: rows of seqLen shifted left, zero-filled, as gathering the shifted ids', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(13);
    for (const { batch, seqLen, vocab, hidden } of [
      { batch: 1, seqLen: 1, vocab: 5, hidden: 3 },
      { batch: 3, seqLen: 17, vocab: 37, hidden: 53 },
      { batch: 2, seqLen: 40, vocab: 130, hidden: 64 },
    ]) {
      const n = batch * seqLen;
      const ids = makeIds(rng, n, vocab);
      const table = rng.floats(vocab * hidden);
      const Ids = gpu.upload([n], 'i32', ids, 'ids');
      const Table = gpu.upload([vocab, hidden], 'f32', table, 'table');
      const Out = gpu.tensor([n, hidden], 'f32', 'out');
      for (const shift of [0, 1, 3, seqLen - 1, seqLen, seqLen + 2]) {
        await embeddingForward(gpu, Ids, Table, Out, { n, vocab, hidden }, { seqLen, shift });
        const want = embeddingForwardRef(table, shiftRowsRef(ids, n, 1, seqLen, shift, 0), { vocab, hidden });
        assertRelClose(await gpu.read(Out), want, 0, `shift ${shift} of ${batch} × ${seqLen}`);
      }
      await assertRejects(
        () => embeddingForward(gpu, Ids, Table, Out, { n, vocab, hidden }, { seqLen: n + 1, shift: 1 }),
        /not whole rows of shifted.seqLen/,
        'n not a multiple of seqLen',
      );
      gpu.release(Ids, Table, Out);
    }
    gpu.destroy();
  });

  t.test('backward scatter-adds repeated ids; overwrite and accumulate; deterministic', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(12);
    let worst = 0;
    for (const shape of SHAPES) {
      const { n, vocab, hidden } = shape;
      const ids = makeIds(rng, n, vocab);
      const dOut = rng.floats(n * hidden);
      const prior = rng.floats(vocab * hidden);
      const Ids = gpu.upload([n], 'i32', ids, 'ids');
      const DOut = gpu.upload([n, hidden], 'f32', dOut, 'dOut');
      const Links = gpu.tensor([2 * n], 'i32', 'links');
      // Overwrite: garbage already in dTable must not leak into the result.
      const DTable = gpu.upload([vocab, hidden], 'f32', new Float32Array(vocab * hidden).fill(Number.NaN), 'dTable');
      await embeddingBackward(gpu, Ids, DOut, DTable, Links, shape);
      const first = await gpu.read(DTable);
      const want = embeddingBackwardRef(ids, dOut, shape);
      worst = Math.max(worst, assertRelClose(first, want, 1e-5, `backward ${JSON.stringify(shape)}`));
      await embeddingBackward(gpu, Ids, DOut, DTable, Links, shape);
      const second = await gpu.read(DTable);
      assertDeepEqual(Array.from(second), Array.from(first), `backward ${JSON.stringify(shape)} bitwise repeatable`);
      // Accumulate: adds onto what is there.
      gpu.write(DTable, prior);
      await embeddingBackward(gpu, Ids, DOut, DTable, Links, shape, { accumulate: true });
      const wantAcc = want.map((v, i) => v + prior[i]);
      worst = Math.max(worst, assertRelClose(await gpu.read(DTable), wantAcc, 1e-5, `accumulate ${JSON.stringify(shape)}`));
      gpu.release(Ids, DOut, Links, DTable);
    }
    note('worstRelErr', worst);
    gpu.destroy();
  });

  t.test('table split into row parts (vocab over one binding)', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(13);
    const [n, vocab, hidden] = [211, 45, 33];
    const shape = { n, vocab, hidden };
    const ids = makeIds(rng, n, vocab);
    ids[0] = 44; // the last row of the last part
    ids[1] = 17; // the first row of the second part
    const table = rng.floats(vocab * hidden);
    const dOut = rng.floats(n * hidden);
    const Ids = gpu.upload([n], 'i32', ids, 'ids');
    const Table = chunkedTable(gpu, [17, 20, 8], hidden, 'table');
    gpu.write(Table, table);
    const Out = gpu.tensor([n, hidden], 'f32', 'out');
    await embeddingForward(gpu, Ids, Table, Out, shape);
    let worst = assertRelClose(await gpu.read(Out), embeddingForwardRef(table, ids, shape), 1e-5, 'chunked forward');
    const DOut = gpu.upload([n, hidden], 'f32', dOut, 'dOut');
    const DTable = chunkedTable(gpu, [17, 20, 8], hidden, 'dTable');
    const Links = gpu.tensor([2 * n], 'i32', 'links');
    await embeddingBackward(gpu, Ids, DOut, DTable, Links, shape);
    worst = Math.max(worst, assertRelClose(await gpu.read(DTable), embeddingBackwardRef(ids, dOut, shape), 1e-5, 'chunked backward'));
    note('worstRelErr', worst);
    gpu.release(Ids, Table, Out, DOut, DTable, Links);
    gpu.destroy();
  });

  t.test('bad arguments name the tensor at fault', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const shape = { n: 4, vocab: 6, hidden: 3 };
    const Ids = gpu.tensor([4], 'i32', 'ids');
    const IdsF = gpu.tensor([4], 'f32', 'idsF');
    const Table = gpu.tensor([6, 3], 'f32', 'table');
    const Wide = gpu.tensor([3, 6], 'f32', 'wide');
    const Out = gpu.tensor([4, 3], 'f32', 'out');
    const Short = gpu.tensor([3], 'i32', 'links');
    await assertRejects(() => embeddingForward(gpu, IdsF, Table, Out, shape), /ids \(idsF \[4\]\) must be i32/, 'f32 ids');
    await assertRejects(() => embeddingForward(gpu, Ids, Wide, Out, shape), /table \(wide\) must have shape \[6, 3\]/, 'transposed table');
    await assertRejects(
      () => embeddingForward(gpu, Ids, Table, Table, shape),
      /out \(table \[6, 3\]\) has 18 elements|shares a GPU buffer/,
      'out aliasing table',
    );
    await assertRejects(
      () => embeddingBackward(gpu, Ids, Out, Table, Short, shape),
      /links \(links \[3\]\) has 3 elements, needs at least 8/,
      'short links',
    );
    await assertRejects(() => embeddingForward(gpu, Ids, Table, Out, { ...shape, hidden: 0 }), /hidden must be an integer/, 'hidden 0');
    assert(true, 'all rejections checked');
    gpu.release(Ids, IdsF, Table, Wide, Out, Short);
    gpu.destroy();
  });
});
