/**
 * The table-driven RoPE the target model uses (src/kernels/rope-table.ts): the host table equals
 * cos/sin of HF's float32 angles, scaling changes only the frequencies it should, and the kernel
 * rotates exactly like a float64 rotate-half with the same table.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { buildRopeTable, inverseRopeTable, ropeTableForward } from '../../src/kernels/rope-table.ts';
import { ropeBackwardRef, ropeForwardRef } from '../../src/reference/rope.ts';
import { ropeInverseFrequencies, type RopeScaling } from '../../src/config/hf-config.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const DEFAULT: RopeScaling = { type: 'default' };

export default defineSuite('kernels/rope-table', (t) => {
  t.test('host table: cos/sin of f32 angles; llama3 scaling slows only the low frequencies', () => {
    const cfg = { headDim: 16, ropeTheta: 10000, ropeScaling: DEFAULT };
    const table = buildRopeTable(cfg, 300);
    const inv = ropeInverseFrequencies(cfg);
    for (const p of [0, 1, 17, 299]) {
      for (let i = 0; i < 8; i++) {
        const angle = Math.fround(p * Math.fround(inv[i]));
        assert(table[(p * 8 + i) * 2] === Math.fround(Math.cos(angle)), `cos at p ${p} i ${i}`);
        assert(table[(p * 8 + i) * 2 + 1] === Math.fround(Math.sin(angle)), `sin at p ${p} i ${i}`);
      }
    }
    const scaled = buildRopeTable(
      { ...cfg, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 64 } },
      300,
    );
    // Dim 0 (wavelength 2π, far below 64 / 4) keeps its frequency; the last dim (longest wavelength) is slowed 8x.
    assert(scaled[299 * 8 * 2] === table[299 * 8 * 2], 'high frequency unchanged');
    const last = Math.fround(299 * Math.fround(inv[7] / 8));
    assert(scaled[(299 * 8 + 7) * 2 + 1] === Math.fround(Math.sin(last)), 'low frequency divided by the factor');
  });

  t.test('kernel rotates like float64 rotate-half with the table; positions index rows', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rows = 37;
    const nHeads = 3;
    const headDim = 12;
    const half = headDim / 2;
    const rng = new Rng(3);
    const x = rng.floats(rows * nHeads * headDim, 2);
    const positions = Int32Array.from({ length: rows }, () => rng.int(0, 500));
    const table = buildRopeTable({ headDim, ropeTheta: 1e6, ropeScaling: DEFAULT }, 500);
    const want = new Float64Array(x.length);
    for (let r = 0; r < rows; r++) {
      for (let h = 0; h < nHeads; h++) {
        for (let i = 0; i < half; i++) {
          const c = table[(positions[r] * half + i) * 2];
          const s = table[(positions[r] * half + i) * 2 + 1];
          const a = (r * nHeads + h) * headDim + i;
          want[a] = x[a] * c - x[a + half] * s;
          want[a + half] = x[a + half] * c + x[a] * s;
        }
      }
    }
    const tx = gpu.upload([rows, nHeads * headDim], 'f32', x, 'x');
    const tp = gpu.upload([rows], 'i32', positions, 'positions');
    const tt = gpu.upload([500, half, 2], 'f32', table, 'table');
    const ty = gpu.tensor([rows, nHeads * headDim], 'f32', 'y');
    await ropeTableForward(gpu, tx, tp, tt, ty, { rows, nHeads, headDim });
    note('rel err', assertRelClose(await gpu.read(ty), want, 1e-6, 'rope-table').toExponential(2));
    await assertRejects(
      () => ropeTableForward(gpu, tx, tp, gpu.tensor([5, 7]), ty, { rows, nHeads, headDim }),
      /table .* not a whole number of \[headDim\/2 = 6, 2\] rows/,
      'table shape',
    );
    await assertRejects(
      () => ropeTableForward(gpu, tx, tp, tt, tx, { rows, nHeads, headDim }),
      /y \(x\) shares a GPU buffer with x/,
      'aliasing',
    );
    gpu.release(tx, tp, tt, ty);
    gpu.destroy();
  });

  t.test('forward and backward (inverse table) vs the float64 reference, with a TTT position offset', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const [rows, nHeads, headDim, theta, offset] = [29, 3, 10, 10000, 3];
    const rng = new Rng(11);
    const x = rng.floats(rows * nHeads * headDim, 1.5);
    const dy = rng.floats(rows * nHeads * headDim, 1.5);
    // Base positions t, shifted by the TTT step k = offset (the draft's step-k rows use t + k).
    const base = Int32Array.from({ length: rows }, (_, r) => r % 17);
    const shifted = base.map((p) => p + offset);
    const forward = buildRopeTable({ headDim, ropeTheta: theta, ropeScaling: DEFAULT }, 64);
    const inverse = inverseRopeTable(forward);
    const tx = gpu.upload([rows, nHeads * headDim], 'f32', x, 'x');
    const tdy = gpu.upload([rows, nHeads * headDim], 'f32', dy, 'dy');
    const tp = gpu.upload([rows], 'i32', shifted, 'positions');
    const tf = gpu.upload([64, headDim / 2, 2], 'f32', forward, 'table');
    const ti = gpu.upload([64, headDim / 2, 2], 'f32', inverse, 'inverse');
    const ty = gpu.tensor([rows, nHeads * headDim], 'f32', 'y');
    const tdx = gpu.tensor([rows, nHeads * headDim], 'f32', 'dx');
    await ropeTableForward(gpu, tx, tp, tf, ty, { rows, nHeads, headDim });
    await ropeTableForward(gpu, tdy, tp, ti, tdx, { rows, nHeads, headDim });
    const args = { rows, nHeads, headDim, theta, posOffset: offset };
    const e1 = assertRelClose(await gpu.read(ty), ropeForwardRef(x, base, args), 1e-5, 'forward');
    const e2 = assertRelClose(await gpu.read(tdx), ropeBackwardRef(dy, base, args), 1e-5, 'backward');
    note('worstRelErr', Math.max(e1, e2));
    gpu.release(tx, tdy, tp, tf, ti, ty, tdx);
    gpu.destroy();
  });

  t.test(
    'strided rows: x and y at their own row stride and offset (heads inside a wider row), forward and backward',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const [rows, nHeads, headDim, theta] = [23, 2, 8, 10000];
      const width = nHeads * headDim;
      // x sits at columns [5, 5 + width) of rows 40 wide; y at columns [16, 16 + width) of rows 48 wide.
      const [strideX, offsetX, strideY, offsetY] = [40, 5, 48, 16];
      const rng = new Rng(12);
      const x = rng.floats(rows * width, 1.5);
      const dy = rng.floats(rows * width, 1.5);
      const positions = Int32Array.from({ length: rows }, (_, r) => (r * 5) % 31);
      const forward = buildRopeTable({ headDim, ropeTheta: theta, ropeScaling: DEFAULT }, 32);
      const place = (v: Float32Array, stride: number, offset: number) => {
        const out = rng.floats(rows * stride, 1); // the columns around the operand: left as they are
        for (let r = 0; r < rows; r++) out.set(v.subarray(r * width, (r + 1) * width), r * stride + offset);
        return out;
      };
      const take = (v: ArrayLike<number>, stride: number, offset: number) =>
        Float32Array.from({ length: rows * width }, (_, e) => v[Math.floor(e / width) * stride + offset + (e % width)]);
      const tp = gpu.upload([rows], 'i32', positions, 'positions');
      const tf = gpu.upload([32, headDim / 2, 2], 'f32', forward, 'table');
      const ti = gpu.upload([32, headDim / 2, 2], 'f32', inverseRopeTable(forward), 'inverse');
      const args = { rows, nHeads, headDim, theta, posOffset: 0 };
      let worst = 0;
      for (const [input, table, ref, what] of [
        [x, tf, ropeForwardRef, 'forward'],
        [dy, ti, ropeBackwardRef, 'backward'],
      ] as const) {
        const tx = gpu.upload([rows, strideX], 'f32', place(input, strideX, offsetX), 'x');
        const around = place(new Float32Array(rows * width), strideY, offsetY);
        const ty = gpu.upload([rows, strideY], 'f32', around, 'y');
        await ropeTableForward(gpu, tx, tp, table, ty, { rows, nHeads, headDim, strideX, offsetX, strideY, offsetY });
        const y = await gpu.read(ty);
        worst = Math.max(worst, assertRelClose(take(y, strideY, offsetY), ref(input, positions, args), 1e-5, what));
        // Every element outside the operand's columns is untouched.
        for (let e = 0; e < y.length; e++) {
          const col = e % strideY;
          if (col < offsetY || col >= offsetY + width) assert(y[e] === around[e], `${what}: y[${e}] outside the operand was written`);
        }
        gpu.release(tx, ty);
      }
      note('worstRelErr', worst);
      const tx = gpu.tensor([rows, strideX], 'f32', 'x');
      const ty = gpu.tensor([rows, width], 'f32', 'y');
      await assertRejects(
        () => ropeTableForward(gpu, tx, tp, tf, ty, { rows, nHeads, headDim, strideX, offsetX: 25 }),
        /x \(x \[23, 40\]\) has 920 elements, needs at least 921/,
        'x too short for its offset',
      );
      await assertRejects(
        () => ropeTableForward(gpu, tx, tp, tf, ty, { rows, nHeads, headDim, strideY: 8 }),
        /strideY must be an integer ≥ 16/,
        'stride below width',
      );
      gpu.release(tp, tf, ti, tx, ty);
      gpu.destroy();
    },
  );
});
