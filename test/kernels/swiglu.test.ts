import { Gpu } from '../../src/gpu/gpu.ts';
import { swigluBackward, swigluBackwardPacked, swigluForward, swigluForwardPacked } from '../../src/kernels/swiglu.ts';
import { Rng } from '../../src/util/random.ts';
import { swigluBackwardRef, swigluForwardRef } from '../../src/reference/swiglu.ts';
import { assert, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { padRows, unpadRows } from './strided.ts';

/** [rows, inter, padGate, padUp, padH]. */
const CASES: [number, number, number, number, number][] = [
  [1, 1, 0, 0, 0],
  [37, 53, 0, 0, 0],
  [130, 176, 0, 0, 0],
  [5, 700, 3, 0, 9],
  [19, 31, 1, 2, 3],
];

export default defineSuite('kernels/swiglu', (t) => {
  t.test('forward and backward vs float64 on odd and padded shapes, saturated gates', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(41);
    let worstFwd = 0;
    let worstBwd = 0;
    for (const [rows, inter, pg, pu, ph] of CASES) {
      const tag = `${rows}x${inter} pad ${pg}/${pu}/${ph}`;
      const [sg, su, sh] = [inter + pg, inter + pu, inter + ph];
      const gate = rng.floats(rows * inter, 4);
      // A few saturated gates: σ underflows/overflows in f32 and must give the limits, not NaN.
      for (let i = 3; i < gate.length; i += 17) gate[i] = i % 2 ? 100 : -100;
      const up = rng.floats(rows * inter);
      const dh = rng.floats(rows * inter);
      const G = gpu.upload([rows * sg], 'f32', padRows(gate, rows, inter, sg), 'gate');
      const U = gpu.upload([rows * su], 'f32', padRows(up, rows, inter, su), 'up');
      const H = gpu.upload([rows * sh], 'f32', padRows(new Float32Array(rows * inter).fill(Number.NaN), rows, inter, sh), 'h');
      const args = { rows, inter, strideGate: sg, strideUp: su, strideH: sh };
      await swigluForward(gpu, G, U, H, args);
      const h = unpadRows(await gpu.read(H), rows, inter, sh, `h ${tag}`);
      worstFwd = Math.max(worstFwd, assertRelClose(h, swigluForwardRef(gate, up), 1e-5, `h ${tag}`));

      const DH = gpu.upload([rows * sh], 'f32', padRows(dh, rows, inter, sh), 'dh');
      const DG = gpu.upload([rows * sg], 'f32', padRows(new Float32Array(rows * inter).fill(Number.NaN), rows, inter, sg), 'dgate');
      const DU = gpu.upload([rows * su], 'f32', padRows(new Float32Array(rows * inter).fill(Number.NaN), rows, inter, su), 'dup');
      await swigluBackward(gpu, G, U, DH, DG, DU, args);
      const want = swigluBackwardRef(gate, up, dh);
      const dgate = unpadRows(await gpu.read(DG), rows, inter, sg, `dgate ${tag}`);
      const dup = unpadRows(await gpu.read(DU), rows, inter, su, `dup ${tag}`);
      assert(dgate.every(Number.isFinite) && dup.every(Number.isFinite), `${tag}: gradients must be finite`);
      worstBwd = Math.max(worstBwd, assertRelClose(dgate, want.dgate, 1e-5, `dgate ${tag}`));
      worstBwd = Math.max(worstBwd, assertRelClose(dup, want.dup, 1e-5, `dup ${tag}`));
      gpu.release(G, U, H, DH, DG, DU);
    }
    note('worstRelErrForward', worstFwd);
    note('worstRelErrBackward', worstBwd);
    gpu.destroy();
  });

  t.test(
    'packed layout (gate | up per row), one column per invocation (inter 1, 53) or four (-vec4: inter 4, 176, 700), vs float64 and with the bits of the unpacked kernels',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(42);
      let worst = 0;
      for (const [rows, inter] of [
        [1, 1],
        [37, 53],
        [9, 4],
        [80, 176],
        [5, 700],
      ]) {
        const tag = `${rows}x${inter}`;
        const gate = rng.floats(rows * inter, 4);
        for (let i = 3; i < gate.length; i += 17) gate[i] = i % 2 ? 100 : -100;
        const up = rng.floats(rows * inter);
        const dh = rng.floats(rows * inter);
        const gu = new Float32Array(rows * 2 * inter);
        for (let r = 0; r < rows; r++) {
          gu.set(gate.subarray(r * inter, (r + 1) * inter), r * 2 * inter);
          gu.set(up.subarray(r * inter, (r + 1) * inter), r * 2 * inter + inter);
        }
        const GU = gpu.upload([rows, 2 * inter], 'f32', gu, 'gu');
        const DH = gpu.upload([rows, inter], 'f32', dh, 'dh');
        const H = gpu.tensor([rows, inter], 'f32', 'h');
        const DGU = gpu.tensor([rows, 2 * inter], 'f32', 'dgu');
        await swigluForwardPacked(gpu, GU, H, { rows, inter });
        await swigluBackwardPacked(gpu, GU, DH, DGU, { rows, inter });
        const h = await gpu.read(H);
        const dgu = await gpu.read(DGU);
        const half = (which: 0 | 1) =>
          Float32Array.from({ length: rows * inter }, (_, i) => dgu[Math.floor(i / inter) * 2 * inter + which * inter + (i % inter)]);
        const want = swigluBackwardRef(gate, up, dh);
        worst = Math.max(worst, assertRelClose(h, swigluForwardRef(gate, up), 1e-5, `h ${tag}`));
        worst = Math.max(worst, assertRelClose(half(0), want.dgate, 1e-5, `dgate ${tag}`));
        worst = Math.max(worst, assertRelClose(half(1), want.dup, 1e-5, `dup ${tag}`));

        // The unpacked kernels on the same operands give the same bits.
        const G = gpu.upload([rows, inter], 'f32', gate, 'gate');
        const U = gpu.upload([rows, inter], 'f32', up, 'up');
        const H2 = gpu.tensor([rows, inter], 'f32', 'h2');
        const DG = gpu.tensor([rows, inter], 'f32', 'dgate');
        const DU = gpu.tensor([rows, inter], 'f32', 'dup');
        await swigluForward(gpu, G, U, H2, { rows, inter });
        await swigluBackward(gpu, G, U, DH, DG, DU, { rows, inter });
        assertRelClose(await gpu.read(H2), h, 0, `h ${tag} packed vs unpacked`);
        assertRelClose(await gpu.read(DG), half(0), 0, `dgate ${tag} packed vs unpacked`);
        assertRelClose(await gpu.read(DU), half(1), 0, `dup ${tag} packed vs unpacked`);
        gpu.release(GU, DH, H, DGU, G, U, H2, DG, DU);
      }
      note('worstRelErr', worst);
      const GU = gpu.tensor([3, 9], 'f32', 'gu');
      const H = gpu.tensor([3, 5], 'f32', 'h');
      await assertRejects(
        () => swigluForwardPacked(gpu, GU, H, { rows: 3, inter: 5 }),
        /gu \(gu \[3, 9\]\) has 27 elements, needs at least 30/,
        'short gu',
      );
      await assertRejects(
        () => swigluBackwardPacked(gpu, GU, H, GU, { rows: 3, inter: 4 }),
        /dgu \(gu\) shares a GPU buffer with gu/,
        'in place',
      );
      gpu.release(GU, H);
      gpu.destroy();
    },
  );

  t.test('bad arguments name the tensor at fault', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const G = gpu.tensor([3, 5], 'f32', 'gate');
    const U = gpu.tensor([3, 4], 'f32', 'up');
    const H = gpu.tensor([3, 5], 'f32', 'h');
    const D = gpu.tensor([3, 5], 'f32', 'd');
    const args = { rows: 3, inter: 5 };
    await assertRejects(() => swigluForward(gpu, G, U, H, args), /up \(up \[3, 4\]\) has 12 elements, needs at least 15/, 'short up');
    await assertRejects(() => swigluForward(gpu, G, G, G, args), /h \(gate\) shares a GPU buffer with gate/, 'in place');
    await assertRejects(() => swigluBackward(gpu, G, H, D, D, D, args), /dgate \(d\) shares a GPU buffer with dh/, 'dgate aliasing dh');
    await assertRejects(() => swigluForward(gpu, G, H, D, { ...args, strideH: 4 }), /strideH must be an integer ≥ 5/, 'stride below inter');
    gpu.release(G, U, H, D);
    gpu.destroy();
  });
});
