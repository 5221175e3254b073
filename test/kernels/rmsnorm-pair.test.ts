import { f32ToF16Bits } from '../../src/formats/f16-bits.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { elementView } from '../../src/gpu/tensor-views.ts';
import { RMSNORM_ROW_GEOMETRY, rmsnormBackward, rmsnormForward } from '../../src/kernels/rmsnorm.ts';
import { rmsnormGatherBackwardDw, rmsnormGatherForward } from '../../src/kernels/rmsnorm-gather.ts';
import { pairBackwardUnfit, rmsnormPairBackward, rmsnormPairForward } from '../../src/kernels/rmsnorm-pair.ts';
import { availableRowVariants, rowDeviceFacts } from '../../src/kernels/row-variant.ts';
import { embeddingForwardRef } from '../../src/reference/embedding.ts';
import { shiftRowsRef } from '../../src/reference/loss.ts';
import { rmsnormBackwardRef, rmsnormForwardRef } from '../../src/reference/rmsnorm.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertRejects, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { CASES, EPS, makeIds, makeTable } from './gather-data.ts';
import { padRows } from './strided.ts';

export default defineSuite('kernels/rmsnorm-pair', (t) => {
  t.test(
    'the pair (input and hidden norm in one dispatch) vs float64 and bit-identical to the two norms, every row variant, f32 and f16 tables',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(34);
      const variants = availableRowVariants('rmsnorm', RMSNORM_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx));
      let worst = 0;
      for (const [sequences, seqLen, vocab, hidden, shift, padY] of CASES) {
        const rows = sequences * seqLen;
        const sy = 2 * hidden + padY;
        const sx = hidden + (padY % 7);
        const ids = makeIds(rng, rows, vocab);
        const table = makeTable(rng, vocab, hidden);
        const [wEmb, wHidden] = [0, 1].map(() => rng.floats(hidden).map((v) => 1 + 0.5 * v));
        const h = rng.floats(rows * hidden);
        const emb = embeddingForwardRef(table, shiftRowsRef(ids, rows, 1, seqLen, shift, 0), { vocab, hidden });
        const want = [rmsnormForwardRef(emb, wEmb, { rows, hidden, eps: EPS }), rmsnormForwardRef(h, wHidden, { rows, hidden, eps: EPS })];
        const Ids = gpu.upload([rows], 'i32', ids, 'ids');
        const WEmb = gpu.upload([hidden], 'f32', wEmb, 'wEmb');
        const WHidden = gpu.upload([hidden], 'f32', wHidden, 'wHidden');
        const X = gpu.upload([rows * sx], 'f32', padRows(h, rows, hidden, sx), 'x');
        const blank = () => new Float32Array(rows * sy).fill(Number.NaN);
        for (const dtype of ['f32', 'f16'] as const) {
          const Table = gpu.upload([vocab, hidden], dtype, dtype === 'f16' ? f32ToF16Bits(table, 'table') : table, `table ${dtype}`);
          const gather = { rows, vocab, hidden, seqLen, shift, eps: EPS };
          for (const variant of variants) {
            const tag = `${variant} ${dtype} ${sequences}x${seqLen} V ${vocab} H ${hidden} shift ${shift}`;
            const Y = gpu.upload([rows * sy], 'f32', blank(), 'y');
            const [InvEmb, InvHidden] = [gpu.tensor([rows], 'f32', 'invRmsEmb'), gpu.tensor([rows], 'f32', 'invRmsHidden')];
            const operands = {
              ids: Ids,
              table: Table,
              wEmb: WEmb,
              x: X,
              wHidden: WHidden,
              y: Y,
              invRmsEmb: InvEmb,
              invRmsHidden: InvHidden,
            };
            await rmsnormPairForward(gpu, operands, { ...gather, strideX: sx, strideY: sy, variant });
            const y = await gpu.read(Y);
            const halves = [0, 1].map((half) => {
              const out = new Float32Array(rows * hidden);
              for (let r = 0; r < rows; r++) out.set(y.subarray(r * sy + half * hidden, r * sy + (half + 1) * hidden), r * hidden);
              return out;
            });
            const inv = [await gpu.read(InvEmb), await gpu.read(InvHidden)];
            for (const half of [0, 1]) {
              worst = Math.max(worst, assertRelClose(halves[half], want[half].y, 1e-5, `y half ${half} ${tag}`));
              worst = Math.max(worst, assertRelClose(inv[half], want[half].invRms, 1e-5, `invRms half ${half} ${tag}`));
            }
            for (let r = 0; r < rows; r++)
              for (let j = 2 * hidden; j < sy; j++) assert(Number.isNaN(y[r * sy + j]), `${tag}: row ${r} padding column ${j} untouched`);

            // The two norms as their own dispatches, in the same layout: the same bits.
            const Y1 = gpu.upload([rows * hidden], 'f32', blank().subarray(0, rows * hidden), 'y1');
            const Y2 = gpu.upload([rows * hidden], 'f32', blank().subarray(0, rows * hidden), 'y2');
            const [Inv1, Inv2] = [gpu.tensor([rows], 'f32', 'inv1'), gpu.tensor([rows], 'f32', 'inv2')];
            await rmsnormGatherForward(gpu, Ids, Table, WEmb, Y1, Inv1, { ...gather, variant });
            await rmsnormForward(gpu, X, WHidden, Y2, Inv2, { rows, hidden, eps: EPS, strideX: sx, variant });
            assert(sameBits(halves[0], await gpu.read(Y1)), `${tag}: the gathered half has rmsnorm/gather-forward's bits`);
            assert(sameBits(halves[1], await gpu.read(Y2)), `${tag}: the hidden half has rmsnorm/forward's bits`);
            assert(sameBits(inv[0], await gpu.read(Inv1)) && sameBits(inv[1], await gpu.read(Inv2)), `${tag}: both 1/rms' bits`);
            gpu.release(Y, InvEmb, InvHidden, Y1, Y2, Inv1, Inv2);
          }
          gpu.release(Table);
        }
        gpu.release(Ids, WEmb, WHidden, X);
      }
      note('variants', variants.join(' '));
      note('worstRelErr', worst);

      // Refusals name the field: a y row too narrow for both halves, two outputs on one buffer.
      const Ids = gpu.upload([4], 'i32', new Int32Array(4), 'ids');
      const Table = gpu.upload([5, 4], 'f32', new Float32Array(20), 'embed');
      const W = gpu.upload([4], 'f32', new Float32Array(4).fill(1), 'w');
      const X = gpu.tensor([4, 4], 'f32', 'x');
      const Y = gpu.tensor([4, 8], 'f32', 'z');
      const Inv = gpu.tensor([4], 'f32', 'inv');
      const g = { rows: 4, vocab: 5, hidden: 4, seqLen: 4, shift: 0, eps: EPS };
      const t = { ids: Ids, table: Table, wEmb: W, x: X, wHidden: W, y: Y, invRmsEmb: Inv, invRmsHidden: gpu.tensor([4], 'f32', 'inv2') };
      await assertRejects(() => rmsnormPairForward(gpu, t, { ...g, strideY: 6 }), /rmsnormPairForward: strideY/, 'strideY below 2·hidden');
      await assertRejects(
        () => rmsnormPairForward(gpu, { ...t, invRmsHidden: Inv }, { ...g, strideY: 8 }),
        /rmsnormPairForward: invRmsEmb \(inv\) shares a GPU buffer with invRmsHidden/,
        'both 1/rms on one buffer',
      );
      gpu.release(Ids, Table, W, X, Y, Inv, t.invRmsHidden);
      gpu.destroy();
    },
  );

  t.test(
    'the pair backward (hidden_norm dx and dw, input_layernorm dw in one dispatch) vs float64 and bit-identical to the two dispatches, f32 and f16 tables',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(35);
      let worst = 0;
      let ran = 0;
      for (const [sequences, seqLen, vocab, hidden, shift, padY] of CASES) {
        const rows = sequences * seqLen;
        // Both weight gradients as views of one buffer, as the optimizer holds them (dwEmb second).
        const gradStride = Math.ceil(hidden / 64) * 64;
        const Grads = gpu.tensor([2 * gradStride], 'f32', 'grads');
        const gradViews = () => ({
          dwHidden: elementView(gpu, Grads, 0, hidden, 'dwHidden'),
          dwEmb: elementView(gpu, Grads, gradStride, hidden, 'dwEmb'),
        });
        const unfit = pairBackwardUnfit(gpu, rows, hidden, gradViews());
        if (unfit) {
          gpu.release(Grads);
          // Refused by name where it does not run; the step then takes the two dispatches.
          note(`${rows}x${hidden}`, unfit);
          continue;
        }
        ran++;
        const sz = 2 * hidden + padY;
        const ids = makeIds(rng, rows, vocab);
        const table = makeTable(rng, vocab, hidden);
        const [wEmb, wHidden] = [0, 1].map(() => rng.floats(hidden).map((v) => 1 + 0.5 * v));
        const h = rng.floats(rows * hidden);
        const dz = rng.floats(rows * sz);
        const halfOf = (half: number) => {
          const out = new Float32Array(rows * hidden);
          for (let r = 0; r < rows; r++) out.set(dz.subarray(r * sz + half * hidden, r * sz + (half + 1) * hidden), r * hidden);
          return out;
        };
        const emb = embeddingForwardRef(table, shiftRowsRef(ids, rows, 1, seqLen, shift, 0), { vocab, hidden });
        const wantEmb = rmsnormBackwardRef(emb, wEmb, halfOf(0), { rows, hidden, eps: EPS });
        const wantHidden = rmsnormBackwardRef(h, wHidden, halfOf(1), { rows, hidden, eps: EPS });
        const invRmsOf = (x: Parameters<typeof rmsnormForwardRef>[0]) =>
          rmsnormForwardRef(x, new Float32Array(hidden).fill(1), { rows, hidden, eps: EPS }).invRms;
        const Ids = gpu.upload([rows], 'i32', ids, 'ids');
        const X = gpu.upload([rows, hidden], 'f32', h, 'x');
        const WHidden = gpu.upload([hidden], 'f32', wHidden, 'wHidden');
        const DZ = gpu.upload([rows * sz], 'f32', dz, 'dz');
        const InvEmb = gpu.upload([rows], 'f32', Float32Array.from(invRmsOf(emb)), 'invRmsEmb');
        const InvHidden = gpu.upload([rows], 'f32', Float32Array.from(invRmsOf(h)), 'invRmsHidden');
        const prior = rng.floats(rows * hidden);
        const Table0 = gpu.upload([vocab, hidden], 'f32', table, 'table for the refusal');
        for (const dtype of ['f32', 'f16'] as const) {
          const Table = gpu.upload([vocab, hidden], dtype, dtype === 'f16' ? f32ToF16Bits(table, 'table') : table, `table ${dtype}`);
          const tag = `${dtype} ${sequences}x${seqLen} V ${vocab} H ${hidden} shift ${shift}`;
          const gather = { rows, vocab, hidden, seqLen, shift };
          // Accumulating into prior values, as the step does (dx onto dH1, both dw onto the step before's).
          const DX = gpu.upload([rows, hidden], 'f32', prior, 'dx');
          const { dwEmb: DWEmb, dwHidden: DWHidden } = gradViews();
          gpu.write(DWEmb, new Float32Array(hidden).fill(0.25));
          gpu.write(DWHidden, new Float32Array(hidden).fill(-0.5));
          const operands = { ids: Ids, table: Table, x: X, wHidden: WHidden, invRmsEmb: InvEmb, invRmsHidden: InvHidden, dz: DZ };
          await rmsnormPairBackward(
            gpu,
            { ...operands, dx: DX, dwEmb: DWEmb, dwHidden: DWHidden },
            { ...gather, strideDy: sz },
            { accumulateDx: true, accumulateDw: true },
          );
          const [dx, dwEmb, dwHidden] = [await gpu.read(DX), await gpu.read(DWEmb), await gpu.read(DWHidden)];
          const wantDx = wantHidden.dx.map((v, i) => v + prior[i]);
          worst = Math.max(worst, assertRelClose(dx, wantDx, 1e-5, `dx ${tag}`));
          worst = Math.max(
            worst,
            assertRelClose(
              dwEmb,
              wantEmb.dw.map((v) => v + 0.25),
              1e-5,
              `dwEmb ${tag}`,
            ),
          );
          worst = Math.max(
            worst,
            assertRelClose(
              dwHidden,
              wantHidden.dw.map((v) => v - 0.5),
              1e-5,
              `dwHidden ${tag}`,
            ),
          );

          // The two dispatches it joins: the same bits.
          const DX2 = gpu.upload([rows, hidden], 'f32', prior, 'dx2');
          const DWEmb2 = gpu.upload([hidden], 'f32', new Float32Array(hidden).fill(0.25), 'dwEmb2');
          const DWHidden2 = gpu.upload([hidden], 'f32', new Float32Array(hidden).fill(-0.5), 'dwHidden2');
          await rmsnormGatherBackwardDw(gpu, Ids, Table, InvEmb, DZ, DWEmb2, { ...gather, strideDy: sz }, { accumulate: true });
          const dzHidden = elementView(gpu, DZ, hidden, rows * sz - hidden, 'dz hidden half');
          await rmsnormBackward(
            gpu,
            X,
            WHidden,
            InvHidden,
            dzHidden,
            DX2,
            DWHidden2,
            { rows, hidden, strideY: sz },
            {
              accumulateDx: true,
              accumulateDw: true,
            },
          );
          assert(sameBits(dx, await gpu.read(DX2)), `${tag}: dx has rmsnormBackward's bits`);
          assert(sameBits(dwHidden, await gpu.read(DWHidden2)), `${tag}: dwHidden has rmsnormBackward's bits`);
          assert(sameBits(dwEmb, await gpu.read(DWEmb2)), `${tag}: dwEmb has rmsnormGatherBackwardDw's bits`);
          gpu.release(Table, DX, DX2, DWEmb2, DWHidden2);
        }
        // Gradients in two buffers cannot be one binding: refused, naming both.
        const [Apart, Apart2] = [gpu.tensor([hidden], 'f32', 'dwEmb apart'), gpu.tensor([hidden], 'f32', 'dwHidden apart')];
        await assertRejects(
          () =>
            rmsnormPairBackward(
              gpu,
              {
                ids: Ids,
                table: Table0,
                x: X,
                wHidden: WHidden,
                invRmsEmb: InvEmb,
                invRmsHidden: InvHidden,
                dz: DZ,
                dx: gpu.tensor([rows, hidden], 'f32', 'dx3'),
                dwEmb: Apart,
                dwHidden: Apart2,
              },
              { rows, vocab, hidden, seqLen, shift, strideDy: sz },
            ),
          /rmsnormPairBackward: dwEmb \(dwEmb apart\) and dwHidden \(dwHidden apart\) are not views of one buffer/,
          'gradients in two buffers',
        );
        // Overlapping gradients would race on their writes: refused, naming both.
        const overlapping = {
          dwEmb: elementView(gpu, Grads, 0, hidden, 'dwEmb here'),
          dwHidden: elementView(gpu, Grads, 0, hidden, 'dwHidden here'),
        };
        assert(
          /dwEmb \(dwEmb here\) and dwHidden \(dwHidden here\) overlap/.test(pairBackwardUnfit(gpu, rows, hidden, overlapping) ?? ''),
          'overlapping gradients refused',
        );
        gpu.release(Ids, X, WHidden, DZ, InvEmb, InvHidden, Grads, Apart, Apart2, Table0);
      }
      // A CPU adapter with subgroups of 8 and ten storage buffers per stage runs it at the fixture's and the lab's
      // shapes; any other device refuses it by name.
      const facts = rowDeviceFacts(ctx);
      if (
        ctx.features.has('subgroups') &&
        (facts.subgroupMinSize ?? 0) >= 8 &&
        facts.fallbackAdapter &&
        (ctx.limits.maxStorageBuffersPerShaderStage ?? 8) >= 10
      )
        assert(ran >= 2, `ran ${ran} cases`);
      else {
        const Ids = gpu.upload([80], 'i32', new Int32Array(80), 'ids');
        const Table = gpu.upload([4, 64], 'f32', new Float32Array(256), 'embed');
        const [X, DX] = [gpu.tensor([80, 64], 'f32', 'x'), gpu.tensor([80, 64], 'f32', 'dx')];
        const [V, DZ] = [gpu.tensor([80], 'f32', 'inv'), gpu.tensor([80, 128], 'f32', 'dz')];
        const W = gpu.tensor([64], 'f32', 'w');
        const Grads = gpu.tensor([128], 'f32', 'grads');
        const [dwHidden, dwEmb] = [elementView(gpu, Grads, 0, 64, 'dwHidden'), elementView(gpu, Grads, 64, 64, 'dwEmb')];
        const t = { ids: Ids, table: Table, x: X, wHidden: W, invRmsEmb: V, invRmsHidden: V, dz: DZ, dx: DX, dwEmb, dwHidden };
        await assertRejects(
          () => rmsnormPairBackward(gpu, t, { rows: 80, vocab: 4, hidden: 64, seqLen: 40, shift: 0, strideDy: 128 }),
          /rmsnormPairBackward: /,
          'refused where it does not run',
        );
        gpu.release(Ids, Table, X, DX, V, DZ, W, Grads);
      }
      note('cases run', ran);
      note('worstRelErr', worst);
      gpu.destroy();
    },
  );
});
