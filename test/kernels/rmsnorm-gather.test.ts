import { f32ToF16Bits } from '../../src/formats/f16-bits.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { Tensor } from '../../src/gpu/tensor.ts';
import { embeddingForward } from '../../src/kernels/embedding.ts';
import { RMSNORM_ROW_GEOMETRY, rmsnormBackward, rmsnormForward } from '../../src/kernels/rmsnorm.ts';
import { rmsnormGatherBackwardDw, rmsnormGatherForward } from '../../src/kernels/rmsnorm-gather.ts';
import { availableRowVariants, rowDeviceFacts } from '../../src/kernels/row-variant.ts';
import { embeddingForwardRef } from '../../src/reference/embedding.ts';
import { shiftRowsRef } from '../../src/reference/loss.ts';
import { rmsnormBackwardRef, rmsnormForwardRef } from '../../src/reference/rmsnorm.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertRejects, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { CASES, EPS, makeIds, makeTable } from './gather-data.ts';
import { padRows, unpadRows } from './strided.ts';

export default defineSuite('kernels/rmsnorm-gather', (t) => {
  t.test(
    'forward and dw vs float64 and bit-identical to embedding/gather then rmsnorm, every row variant, f32 and f16 tables',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(33);
      const variants = availableRowVariants('rmsnorm', RMSNORM_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx));
      note('variants', variants.join(' '));
      let worst = 0;
      for (const [sequences, seqLen, vocab, hidden, shift, padY] of CASES) {
        const rows = sequences * seqLen;
        const sy = hidden + padY;
        const ids = makeIds(rng, rows, vocab);
        const table = makeTable(rng, vocab, hidden);
        const w = rng.floats(hidden).map((v) => 1 + 0.5 * v);
        const dy = rng.floats(rows * hidden);
        const x = embeddingForwardRef(table, shiftRowsRef(ids, rows, 1, seqLen, shift, 0), { vocab, hidden });
        const want = rmsnormForwardRef(x, w, { rows, hidden, eps: EPS });
        const grads = rmsnormBackwardRef(x, w, dy, { rows, hidden, eps: EPS });
        const Ids = gpu.upload([rows], 'i32', ids, 'ids');
        const W = gpu.upload([hidden], 'f32', w, 'w');
        const DY = gpu.upload([rows * sy], 'f32', padRows(dy, rows, hidden, sy), 'dy');
        for (const dtype of ['f32', 'f16'] as const) {
          const Table = gpu.upload([vocab, hidden], dtype, dtype === 'f16' ? f32ToF16Bits(table, 'table') : table, `table ${dtype}`);
          const gather = { rows, vocab, hidden, seqLen, shift };
          for (const variant of variants) {
            const tag = `${variant} ${dtype} ${sequences}x${seqLen} V ${vocab} H ${hidden} shift ${shift}`;
            const blank = () => padRows(new Float32Array(rows * hidden).fill(Number.NaN), rows, hidden, sy);
            const Y = gpu.upload([rows * sy], 'f32', blank(), 'y');
            const InvRms = gpu.tensor([rows], 'f32', 'invRms');
            await rmsnormGatherForward(gpu, Ids, Table, W, Y, InvRms, { ...gather, eps: EPS, strideY: sy, variant });
            const yPadded = await gpu.read(Y);
            const y = unpadRows(yPadded, rows, hidden, sy, `y ${tag}`);
            worst = Math.max(worst, assertRelClose(y, want.y, 1e-5, `y ${tag}`));
            const invRms = await gpu.read(InvRms);
            worst = Math.max(worst, assertRelClose(invRms, want.invRms, 1e-5, `invRms ${tag}`));

            // The same x through embedding/gather, then rmsnorm/forward in the same layout: the same bits.
            const X = gpu.tensor([rows, hidden], 'f32', 'x');
            await embeddingForward(gpu, Ids, Table, X, { n: rows, vocab, hidden }, { seqLen, shift });
            const Y2 = gpu.upload([rows * sy], 'f32', blank(), 'y2');
            const InvRms2 = gpu.tensor([rows], 'f32', 'invRms2');
            await rmsnormForward(gpu, X, W, Y2, InvRms2, { rows, hidden, eps: EPS, strideY: sy, variant });
            assert(sameBits(yPadded, await gpu.read(Y2)), `${tag}: y has the bits of gather + rmsnorm/forward`);
            assert(sameBits(invRms, await gpu.read(InvRms2)), `${tag}: invRms has the bits of gather + rmsnorm/forward`);

            // dw from the rows gathered again, written then accumulated; the bits of the sized layouts'
            // dw (backward-dw-columns, or the fused subgroup kernel's same column sums).
            const DW = gpu.upload([hidden], 'f32', new Float32Array(hidden).fill(Number.NaN), 'dw');
            await rmsnormGatherBackwardDw(gpu, Ids, Table, InvRms, DY, DW, { ...gather, strideDy: sy });
            const dw = await gpu.read(DW);
            worst = Math.max(worst, assertRelClose(dw, grads.dw, 1e-5, `dw ${tag}`));
            await rmsnormGatherBackwardDw(gpu, Ids, Table, InvRms, DY, DW, { ...gather, strideDy: sy }, { accumulate: true });
            worst = Math.max(
              worst,
              assertRelClose(
                await gpu.read(DW),
                grads.dw.map((v) => 2 * v),
                1e-5,
                `dw accumulated ${tag}`,
              ),
            );
            if (variant !== 'wide') {
              const DX = gpu.tensor([rows, hidden], 'f32', 'dx scratch');
              const DW2 = gpu.tensor([hidden], 'f32', 'dw2');
              await rmsnormBackward(gpu, X, W, InvRms2, DY, DX, DW2, { rows, hidden, strideY: sy, variant });
              assert(sameBits(dw, await gpu.read(DW2)), `${tag}: dw has the bits of gather + rmsnorm's ${variant} backward`);
              gpu.release(DX, DW2);
            }
            gpu.release(Y, InvRms, X, Y2, InvRms2, DW);
          }
          gpu.release(Table);
        }
        gpu.release(Ids, W, DY);
      }
      note('worstRelErr', worst);
      gpu.destroy();
    },
  );

  t.test('a split table, a partial sequence or a wrong table shape is refused, naming it', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const Ids = gpu.upload([8], 'i32', new Int32Array(8), 'ids');
    const Table = gpu.upload([5, 4], 'f32', new Float32Array(20), 'embed');
    const W = gpu.upload([4], 'f32', new Float32Array(4).fill(1), 'w');
    const Y = gpu.tensor([8, 4], 'f32', 'y');
    const InvRms = gpu.tensor([8], 'f32', 'invRms');
    const g = { rows: 8, vocab: 5, hidden: 4, seqLen: 4, shift: 1, eps: EPS };
    await assertRejects(
      () => rmsnormGatherForward(gpu, Ids, Table, W, Y, InvRms, { ...g, seqLen: 3 }),
      /rows = 8 are not whole sequences of seqLen = 3/,
      'partial',
    );
    await assertRejects(
      () => rmsnormGatherForward(gpu, Ids, Table, W, Y, InvRms, { ...g, vocab: 6 }),
      /embed.*must have shape \[6, 4\]/,
      'shape',
    );
    const Both = gpu.tensor([32], 'f32', 'both');
    await assertRejects(
      () => rmsnormGatherForward(gpu, Ids, Table, Both, Both, InvRms, g),
      /y \(both\).*w \(both\)|w.*both.*y/,
      'y aliasing w',
    );
    // A table over two bindings (as gpu.tensor splits a vocabulary-sized one into row parts).
    const pieces = [gpu.tensor([3, 4], 'f32', 'embed'), gpu.tensor([2, 4], 'f32', 'embed')];
    const Split = new Tensor(
      [5, 4],
      'f32',
      [
        { ...pieces[0].part, rowStart: 0, rowCount: 3 },
        { ...pieces[1].part, rowStart: 3, rowCount: 2 },
      ],
      'embed',
    );
    await assertRejects(
      () => rmsnormGatherBackwardDw(gpu, Ids, Split, InvRms, Y, W, g),
      /rmsnormGatherBackwardDw: table \(embed\) must be one binding of f32 or f16, got 2 part\(s\)/,
      'split',
    );
    gpu.release(...pieces);
    gpu.release(Ids, Table, W, Y, InvRms, Both);
    gpu.destroy();
  });
});
