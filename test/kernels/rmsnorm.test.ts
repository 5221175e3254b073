import { Gpu } from '../../src/gpu/gpu.ts';
import { RMSNORM_ROW_GEOMETRY, rmsnormBackward, rmsnormForward } from '../../src/kernels/rmsnorm.ts';
import { availableRowVariants, ROW_VARIANTS, rowDeviceFacts, type RowVariant } from '../../src/kernels/row-variant.ts';
import { Rng } from '../../src/util/random.ts';
import { rmsnormBackwardRef, rmsnormForwardRef } from '../../src/reference/rmsnorm.ts';
import { assert, assertRejects, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { padRows, unpadRows } from './strided.ts';

/** [rows, hidden, extra padding of x rows, extra padding of y rows]: odd sizes, hidden above 256. */
const CASES: [number, number, number, number][] = [
  [1, 3, 0, 0], // (hidden 1 is ill-conditioned: dx = dy·w·r·eps/(x²+eps) cancels in f32)
  [3, 7, 0, 0],
  [37, 53, 3, 5],
  [9, 300, 0, 0],
  [130, 64, 1, 0],
  [5, 1000, 7, 2],
  [224, 128, 0, 0], // the lab config's draft norms
  [11, 1024, 0, 3],
];
const EPS = 1e-6;

/** Rows of very different magnitudes, so the per-row statistics matter. */
function makeX(rng: Rng, rows: number, hidden: number): Float32Array {
  const x = rng.floats(rows * hidden);
  for (let r = 0; r < rows; r++) {
    const scale = [1, 1e-2, 30, 0.3][r % 4];
    for (let j = 0; j < hidden; j++) x[r * hidden + j] *= scale;
  }
  return x;
}

export default defineSuite('kernels/rmsnorm', (t) => {
  t.test('forward and backward vs float64 on odd and padded shapes, every row variant of this device', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(21);
    let worstFwd = 0;
    let worstBwd = 0;
    const variants = availableRowVariants('rmsnorm', RMSNORM_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx));
    note('variants', variants.join(' '));
    for (const [[rows, hidden, padX, padY], variant] of CASES.flatMap((c) => variants.map((v) => [c, v] as const))) {
      const tag = `${variant} ${rows}x${hidden} pad ${padX}/${padY}`;
      const sx = hidden + padX;
      const sy = hidden + padY;
      const x = makeX(rng, rows, hidden);
      const w = rng.floats(hidden).map((v) => 1 + 0.5 * v);
      const dy = rng.floats(rows * hidden);
      const X = gpu.upload([rows * sx], 'f32', padRows(x, rows, hidden, sx), 'x');
      const W = gpu.upload([hidden], 'f32', w, 'w');
      const Y = gpu.upload([rows * sy], 'f32', padRows(new Float32Array(rows * hidden).fill(Number.NaN), rows, hidden, sy), 'y');
      const InvRms = gpu.tensor([rows], 'f32', 'invRms');
      const args = { rows, hidden, eps: EPS, strideX: sx, strideY: sy, variant };
      await rmsnormForward(gpu, X, W, Y, InvRms, args);
      const want = rmsnormForwardRef(x, w, { rows, hidden, eps: EPS });
      const y = unpadRows(await gpu.read(Y), rows, hidden, sy, `y ${tag}`);
      worstFwd = Math.max(worstFwd, assertRelClose(y, want.y, 1e-5, `y ${tag}`));
      worstFwd = Math.max(worstFwd, assertRelClose(await gpu.read(InvRms), want.invRms, 1e-5, `invRms ${tag}`));

      const DY = gpu.upload([rows * sy], 'f32', padRows(dy, rows, hidden, sy), 'dy');
      const DX = gpu.upload([rows * sx], 'f32', padRows(new Float32Array(rows * hidden).fill(Number.NaN), rows, hidden, sx), 'dx');
      const DW = gpu.upload([hidden], 'f32', new Float32Array(hidden).fill(Number.NaN), 'dw');
      await rmsnormBackward(gpu, X, W, InvRms, DY, DX, DW, args);
      const grads = rmsnormBackwardRef(x, w, dy, { rows, hidden, eps: EPS });
      const dx = unpadRows(await gpu.read(DX), rows, hidden, sx, `dx ${tag}`);
      worstBwd = Math.max(worstBwd, assertRelClose(dx, grads.dx, 1e-5, `dx ${tag}`));
      worstBwd = Math.max(worstBwd, assertRelClose(await gpu.read(DW), grads.dw, 1e-5, `dw ${tag}`));

      // Accumulating a second backward doubles both gradients.
      await rmsnormBackward(gpu, X, W, InvRms, DY, DX, DW, args, { accumulateDx: true, accumulateDw: true });
      const dx2 = unpadRows(await gpu.read(DX), rows, hidden, sx, `dx accumulate ${tag}`);
      worstBwd = Math.max(
        worstBwd,
        assertRelClose(
          dx2,
          grads.dx.map((v) => 2 * v),
          1e-5,
          `dx accumulate ${tag}`,
        ),
      );
      worstBwd = Math.max(
        worstBwd,
        assertRelClose(
          await gpu.read(DW),
          grads.dw.map((v) => 2 * v),
          1e-5,
          `dw accumulate ${tag}`,
        ),
      );
      gpu.release(X, W, Y, InvRms, DY, DX, DW);
    }
    note('worstRelErrForward', worstFwd);
    note('worstRelErrBackward', worstBwd);
    gpu.destroy();
  });

  // One test per variant: a software adapter takes tens of seconds for each at these row counts.
  for (const variant of ROW_VARIANTS) {
    t.test(
      `many rows fold into a 2-D grid (${variant}), with and without dw (a frozen weight)`,
      async ({ gpu: ctx, note }) => {
        const gpu = new Gpu(ctx);
        const rng = new Rng(22);
        const hidden = 3;
        // Past the 65535-workgroup limit of one dimension in this variant's layout.
        const rows = 65535 * (variant === 'wide' ? 1 : RMSNORM_ROW_GEOMETRY[variant].ROWS) + 37;
        const x = makeX(rng, rows, hidden);
        const w = rng.floats(hidden);
        const dy = rng.floats(rows * hidden);
        const X = gpu.upload([rows, hidden], 'f32', x, 'x');
        const W = gpu.upload([hidden], 'f32', w, 'w');
        const Y = gpu.tensor([rows, hidden], 'f32', 'y');
        const InvRms = gpu.tensor([rows], 'f32', 'invRms');
        const DY = gpu.upload([rows, hidden], 'f32', dy, 'dy');
        const DX = gpu.tensor([rows, hidden], 'f32', 'dx');
        if (!availableRowVariants('rmsnorm', RMSNORM_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx)).includes(variant)) {
          await assertRejects(
            () => rmsnormForward(gpu, X, W, Y, InvRms, { rows, hidden, eps: 1e-5, variant }),
            /rmsnormForward: rmsnorm variant subgroup needs/,
            'refusal',
          );
          note('checked', 'refused');
        } else {
          await rmsnormForward(gpu, X, W, Y, InvRms, { rows, hidden, eps: 1e-5, variant });
          let worst = assertRelClose(await gpu.read(Y), rmsnormForwardRef(x, w, { rows, hidden, eps: 1e-5 }).y, 1e-5, `${variant} y`);
          const grads = rmsnormBackwardRef(x, w, dy, { rows, hidden, eps: 1e-5 });
          await rmsnormBackward(gpu, X, W, InvRms, DY, DX, undefined, { rows, hidden, variant });
          worst = Math.max(worst, assertRelClose(await gpu.read(DX), grads.dx, 1e-5, `${variant} dx`));
          // With dw too (in the subgroup layout fused, one dispatch whose grid also folds).
          const DW = gpu.tensor([hidden], 'f32', 'dw');
          await rmsnormBackward(gpu, X, W, InvRms, DY, DX, DW, { rows, hidden, variant }, { fuse: true });
          worst = Math.max(worst, assertRelClose(await gpu.read(DX), grads.dx, 1e-5, `${variant} dx with dw`));
          worst = Math.max(worst, assertRelClose(await gpu.read(DW), grads.dw, 1e-4, `${variant} dw`));
          gpu.release(DW);
          note('worstRelErr', worst);
        }
        gpu.release(X, W, Y, InvRms, DY, DX);
        gpu.destroy();
      },
      { timeoutMs: 300_000 },
    );
  }

  t.test(
    'subgroup variant, dx and dw fused or not: bit-identical to rows where the device has subgroups, else refused with the reason',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(23);
      const [rows, hidden] = [37, 300];
      const x = makeX(rng, rows, hidden);
      const X = gpu.upload([rows, hidden], 'f32', x, 'x');
      const W = gpu.upload([hidden], 'f32', rng.floats(hidden), 'w');
      const DY = gpu.upload([rows, hidden], 'f32', rng.floats(rows * hidden), 'dy');
      const run = async (variant: RowVariant, fuse: boolean): Promise<ArrayLike<number>[]> => {
        const Y = gpu.tensor([rows, hidden], 'f32', 'y');
        const R = gpu.tensor([rows], 'f32', 'invRms');
        const DX = gpu.tensor([rows, hidden], 'f32', 'dx');
        const DW = gpu.tensor([hidden], 'f32', 'dw');
        await rmsnormForward(gpu, X, W, Y, R, { rows, hidden, eps: EPS, variant });
        await rmsnormBackward(gpu, X, W, R, DY, DX, DW, { rows, hidden, variant }, { fuse });
        const out = [await gpu.read(Y), await gpu.read(R), await gpu.read(DX), await gpu.read(DW)];
        gpu.release(Y, R, DX, DW);
        return out;
      };
      if (availableRowVariants('rmsnorm', RMSNORM_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx)).includes('subgroup')) {
        // rows runs dx and dw as two dispatches; subgroup as one (backward-subgroup-fused) or, unfused, two.
        const [a, b, c] = [await run('rows', false), await run('subgroup', true), await run('subgroup', false)];
        for (const [other, name] of [
          [b, 'subgroup'],
          [c, 'subgroup unfused'],
        ] as const)
          a.forEach((t, i) =>
            assert(
              Array.from(t).every((v, j) => Object.is(v, other[i][j])),
              `output ${i} (y, invRms, dx, dw): rows and ${name} differ`,
            ),
          );
        note('checked', 'bit-identical');
      } else {
        const args = { rows, hidden, eps: EPS, variant: 'subgroup' as const };
        await assertRejects(
          () => rmsnormForward(gpu, X, W, DY, gpu.tensor([rows], 'f32', 'r'), args),
          /rmsnormForward: rmsnorm variant subgroup needs (the WebGPU feature "subgroups"|subgroups of at least)/,
          'refusal',
        );
        note('checked', 'refused');
      }
      gpu.release(X, W, DY);
      gpu.destroy();
    },
  );

  t.test(
    "rows in blocks (several TTT steps at once): each block's 1/rms at its stride, the bits of one call per block",
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const [blockRows, blocks, hidden, stride] = [80, 4, 64, 128];
      const rng = new Rng(77);
      const x = makeX(rng, blocks * blockRows, hidden);
      const w = rng.floats(hidden);
      const X = gpu.upload([blocks * blockRows, hidden], 'f32', x, 'x');
      const W = gpu.upload([hidden], 'f32', w, 'w');
      const variants = availableRowVariants('rmsnorm', RMSNORM_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx));
      note('variants', variants.join(' '));
      for (const variant of variants) {
        const Y = gpu.tensor([blocks * blockRows, hidden], 'f32', 'y');
        const table = gpu.zeros([blocks, stride], 'f32', 'invRms table');
        const args = { rows: blocks * blockRows, hidden, eps: EPS, variant };
        await rmsnormForward(gpu, X, W, Y, table, { ...args, invRmsBlocks: { rows: blockRows, stride } });
        const [y, inv] = (await Promise.all([gpu.read(Y), gpu.read(table)])) as Float32Array[];
        for (let b = 0; b < blocks; b++) {
          const xb = gpu.upload([blockRows, hidden], 'f32', x.subarray(b * blockRows * hidden, (b + 1) * blockRows * hidden), 'xb');
          const yb = gpu.tensor([blockRows, hidden], 'f32', 'yb');
          const ib = gpu.tensor([blockRows], 'f32', 'ib');
          await rmsnormForward(gpu, xb, W, yb, ib, { ...args, rows: blockRows });
          const [yOne, iOne] = (await Promise.all([gpu.read(yb), gpu.read(ib)])) as Float32Array[];
          assert(sameBits(y.subarray(b * blockRows * hidden, (b + 1) * blockRows * hidden), yOne), `${variant}: block ${b}'s y`);
          assert(sameBits(inv.subarray(b * stride, b * stride + blockRows), iOne), `${variant}: block ${b}'s 1/rms`);
          assert(
            inv.subarray(b * stride + blockRows, (b + 1) * stride).every((v) => v === 0),
            `${variant}: the gap after block ${b} untouched`,
          );
          gpu.release(xb, yb, ib);
        }
        gpu.release(Y, table);
      }
      const Y = gpu.tensor([blocks * blockRows, hidden], 'f32', 'y');
      const args = { rows: blocks * blockRows, hidden, eps: EPS };
      const short = gpu.tensor([blocks, blockRows], 'f32', 'short');
      await assertRejects(
        () => rmsnormForward(gpu, X, W, Y, short, { ...args, invRmsBlocks: { rows: blockRows, stride } }),
        /invRms \(short \[4, 80\]\) has 320 elements, needs at least 464/,
        'a table shorter than the blocks at their stride',
      );
      await assertRejects(
        () => rmsnormForward(gpu, X, W, Y, short, { ...args, invRmsBlocks: { rows: 60, stride } }),
        /rows 320 is not a whole number of invRmsBlocks.rows 60/,
        'blocks that do not divide the rows',
      );
      gpu.release(X, W, Y, short);
      gpu.destroy();
    },
  );

  t.test('bad arguments name the tensor at fault', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const X = gpu.tensor([4, 8], 'f32', 'x');
    const W = gpu.tensor([7], 'f32', 'w');
    const W8 = gpu.tensor([8], 'f32', 'w8');
    const Y = gpu.tensor([4, 8], 'f32', 'y');
    const R = gpu.tensor([4], 'i32', 'invRmsI');
    const R4 = gpu.tensor([4], 'f32', 'invRms');
    const args = { rows: 4, hidden: 8, eps: 1e-6 };
    await assertRejects(() => rmsnormForward(gpu, X, W, Y, R4, args), /w \(w \[7\]\) has 7 elements, needs at least 8/, 'short w');
    await assertRejects(() => rmsnormForward(gpu, X, W8, Y, R, args), /invRms \(invRmsI \[4\]\) must be f32/, 'i32 invRms');
    await assertRejects(
      () => rmsnormForward(gpu, X, W8, Y, R4, { ...args, strideX: 9 }),
      /x \(x \[4, 8\]\) has 32 elements, needs at least 35/,
      'stride past the end',
    );
    await assertRejects(
      () => rmsnormForward(gpu, X, W8, Y, R4, { ...args, strideY: 7 }),
      /strideY must be an integer ≥ 8/,
      'stride below hidden',
    );
    await assertRejects(() => rmsnormForward(gpu, X, W8, X, R4, args), /y \(x\) shares a GPU buffer with x/, 'in place');
    await assertRejects(() => rmsnormForward(gpu, X, W8, Y, R4, { ...args, eps: Number.NaN }), /eps must be a finite number/, 'NaN eps');
    await assertRejects(() => rmsnormBackward(gpu, X, W8, R4, Y, X, W8, args), /dx \(x\) shares a GPU buffer with x/, 'dx aliasing x');
    gpu.release(X, W, W8, Y, R, R4);
    gpu.destroy();
  });
});
