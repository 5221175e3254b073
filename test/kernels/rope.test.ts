import { Gpu } from '../../src/gpu/gpu.ts';
import { ropeBackward, ropeForward } from '../../src/kernels/rope.ts';
import { Rng } from '../../src/reference/random.ts';
import { ropeBackwardRef, ropeForwardRef } from '../../src/reference/rope.ts';
import { assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { padRows, unpadRows } from './strided.ts';

interface Case {
  rows: number;
  nHeads: number;
  headDim: number;
  theta: number;
  padIn: number;
  padOut: number;
}

const CASES: Case[] = [
  { rows: 1, nHeads: 1, headDim: 2, theta: 10000, padIn: 0, padOut: 0 },
  { rows: 37, nHeads: 3, headDim: 16, theta: 10000, padIn: 0, padOut: 0 },
  { rows: 80, nHeads: 4, headDim: 16, theta: 10000, padIn: 0, padOut: 0 },
  { rows: 101, nHeads: 2, headDim: 64, theta: 500000, padIn: 5, padOut: 3 },
  { rows: 9, nHeads: 5, headDim: 128, theta: 1e6, padIn: 0, padOut: 1 },
];

export default defineSuite('kernels/rope', (t) => {
  t.test('forward and inverse at TTT offsets vs float64 on odd and padded shapes', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(31);
    let worstFwd = 0;
    let worstBwd = 0;
    for (const c of CASES) {
      const width = c.nHeads * c.headDim;
      const [sIn, sOut] = [width + c.padIn, width + c.padOut];
      // Positions as in training: t within a row of length S, restarting per sequence, some padded
      // rows repeating positions; all below 300 so the f32 angle rounding stays under 1e-5.
      const positions = Int32Array.from({ length: c.rows }, (_, r) => (r % 40) + (r >= 60 ? 200 : 0));
      const x = rng.floats(c.rows * width);
      const dy = rng.floats(c.rows * width);
      const Pos = gpu.upload([c.rows], 'i32', positions, 'positions');
      const X = gpu.upload([c.rows * sIn], 'f32', padRows(x, c.rows, width, sIn), 'x');
      const DY = gpu.upload([c.rows * sIn], 'f32', padRows(dy, c.rows, width, sIn), 'dy');
      const Y = gpu.upload([c.rows * sOut], 'f32', padRows(new Float32Array(c.rows * width), c.rows, width, sOut), 'y');
      for (const posOffset of [0, 1, 3]) {
        const tag = `${c.rows}x${c.nHeads}x${c.headDim} theta ${c.theta} offset ${posOffset}`;
        const args = { rows: c.rows, nHeads: c.nHeads, headDim: c.headDim, theta: c.theta, posOffset, strideIn: sIn, strideOut: sOut };
        await ropeForward(gpu, X, Pos, Y, args);
        const y = unpadRows(await gpu.read(Y), c.rows, width, sOut, `y ${tag}`);
        worstFwd = Math.max(worstFwd, assertRelClose(y, ropeForwardRef(x, positions, args), 1e-5, `forward ${tag}`));
        await ropeBackward(gpu, DY, Pos, Y, args);
        const dx = unpadRows(await gpu.read(Y), c.rows, width, sOut, `dx ${tag}`);
        worstBwd = Math.max(worstBwd, assertRelClose(dx, ropeBackwardRef(dy, positions, args), 1e-5, `backward ${tag}`));
      }
      gpu.release(Pos, X, DY, Y);
    }
    note('worstRelErrForward', worstFwd);
    note('worstRelErrBackward', worstBwd);
    gpu.destroy();
  });

  t.test('inverse undoes forward; offset k equals shifting positions by k', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(32);
    const [rows, nHeads, headDim] = [23, 2, 32];
    const args = { rows, nHeads, headDim, theta: 10000 };
    const positions = Int32Array.from({ length: rows }, (_, r) => r);
    const x = rng.floats(rows * nHeads * headDim);
    const Pos = gpu.upload([rows], 'i32', positions, 'positions');
    const Shifted = gpu.upload([rows], 'i32', positions.map((p) => p + 2), 'positions+2');
    const X = gpu.upload([rows, nHeads * headDim], 'f32', x, 'x');
    const Y = gpu.tensor([rows, nHeads * headDim], 'f32', 'y');
    const Z = gpu.tensor([rows, nHeads * headDim], 'f32', 'z');
    await ropeForward(gpu, X, Pos, Y, args);
    await ropeBackward(gpu, Y, Pos, Z, args);
    const roundTrip = assertRelClose(await gpu.read(Z), x, 1e-6, 'inverse(forward(x))');
    await ropeForward(gpu, X, Pos, Y, { ...args, posOffset: 2 });
    await ropeForward(gpu, X, Shifted, Z, args);
    assertRelClose(await gpu.read(Y), await gpu.read(Z), 0, 'offset 2 vs positions + 2');
    note('roundTripRelErr', roundTrip);
    gpu.release(Pos, Shifted, X, Y, Z);
    gpu.destroy();
  });

  t.test('bad arguments name the tensor at fault', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const Pos = gpu.tensor([4], 'i32', 'positions');
    const PosF = gpu.tensor([4], 'f32', 'positionsF');
    const X = gpu.tensor([4, 2, 8], 'f32', 'x');
    const Y = gpu.tensor([4, 2, 8], 'f32', 'y');
    const args = { rows: 4, nHeads: 2, headDim: 8, theta: 10000 };
    await assertRejects(() => ropeForward(gpu, X, PosF, Y, args), /positions \(positionsF \[4\]\) must be i32/, 'f32 positions');
    await assertRejects(() => ropeForward(gpu, X, Pos, Y, { ...args, headDim: 7 }), /headDim must be even/, 'odd headDim');
    await assertRejects(() => ropeForward(gpu, X, Pos, X, args), /y \(x\) shares a GPU buffer with x/, 'in place');
    await assertRejects(() => ropeBackward(gpu, X, Pos, Y, { ...args, strideIn: 20 }), /dy \(x \[4, 2, 8\]\) has 64 elements, needs at least 76/, 'stride');
    await assertRejects(() => ropeForward(gpu, X, Pos, Y, { ...args, posOffset: 0.5 }), /posOffset must be an integer/, 'fractional offset');
    gpu.release(Pos, PosF, X, Y);
    gpu.destroy();
  });
});
