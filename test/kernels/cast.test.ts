/**
 * The f32 ↔ f16 cast kernels against the float64 reference (src/reference/cast.ts): exact bits
 * both ways (every one of the 65536 f16 patterns widened; rounding ties, f16 subnormals, the
 * overflow edge and specials narrowed), the overflow count, odd element counts, and row-split
 * tensors whose f32 and f16 forms are split at different rows.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { castF16ToF32, castF32ToF16, toF16 } from '../../src/kernels/cast.ts';
import { castF16ToF32Ref, castF32ToF16Ref, f32ToF16Ref, f16ToF32Ref } from '../../src/reference/cast.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** f32 values covering every rounding path: random magnitudes from 1e-9 to 1e5, ties, edges, specials. */
function narrowingCases(n: number, seed: number): Float32Array {
  const rng = new Rng(seed);
  const v = new Float32Array(n);
  const bits = new Uint32Array(v.buffer);
  for (let i = 0; i < n; i++) {
    const kind = i % 4;
    if (kind === 0) v[i] = (rng.next() * 2 - 1) * 10 ** (rng.next() * 14 - 9);
    else if (kind === 1) v[i] = (rng.next() * 2 - 1) * 4;
    else if (kind === 2) {
      // An exact tie between two f16 values: the 13 dropped mantissa bits are 1000000000000.
      const exp = 103 + rng.int(0, 40); // from f16 subnormals to 65504's binade
      bits[i] = ((rng.int(0, 2) << 31) | (exp << 23) | (rng.int(0, 1024) << 13) | 0x1000) >>> 0;
    } else bits[i] = rng.int(0, 2 ** 31) >>> 0; // any finite or non-finite pattern, positive
  }
  const edges = [
    0,
    -0,
    65504,
    -65504,
    65519.99,
    65520,
    2 ** -24,
    2 ** -25,
    3 * 2 ** -26,
    2 ** -14 - 2 ** -25,
    1e-45,
    Infinity,
    -Infinity,
    Number.NaN,
    1 + 2 ** -11,
    1 + 3 * 2 ** -11,
  ];
  v.set(edges.slice(0, Math.min(edges.length, n)));
  return v;
}

export default defineSuite('kernels/cast', (t) => {
  t.test('reference: known f16 bit patterns', () => {
    const known: [number, number][] = [
      [1, 0x3c00],
      [-2, 0xc000],
      [65504, 0x7bff],
      [65520, 0x7c00],
      [2 ** -24, 0x0001],
      [2 ** -25, 0x0000],
      [3 * 2 ** -25, 0x0002],
      [2 ** -14, 0x0400],
      [1 + 2 ** -11, 0x3c00],
      [1 + 3 * 2 ** -11, 0x3c02],
      [0.1, 0x2e66],
      [-0, 0x8000],
    ];
    for (const [x, bits] of known) assertEqual(f32ToF16Ref(Math.fround(x)), bits, `f16(${x})`);
    const widened: [number, number][] = [
      [0x3c00, 1],
      [0xc000, -2],
      [0x7bff, 65504],
      [0x0001, 2 ** -24],
      [0x0400, 2 ** -14],
      [0x3c02, 1 + 2 ** -9],
      [0x7c00, Infinity],
    ];
    for (const [bits, x] of widened) assertEqual(f16ToF32Ref(bits), x, `f32(0x${bits.toString(16)})`);
  });

  t.test('f32 → f16 bit-exact vs the reference, with the overflow count, at odd and even sizes', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    let total = 0;
    for (const [n, seed] of [
      [1, 1],
      [2, 2],
      [7, 3],
      [1000, 4],
      [4097, 5],
      [65535, 6],
    ] as const) {
      const values = narrowingCases(n, seed);
      const want = castF32ToF16Ref(values);
      const src = gpu.upload([n], 'f32', values, 'src');
      const overflow = gpu.zeros([1], 'u32', 'overflow');
      const dst = await toF16(gpu, src, overflow, 'dst');
      const got = (await gpu.read(dst)) as Uint16Array;
      for (let i = 0; i < n; i++) {
        if (got[i] !== want.bits[i])
          throw new Error(
            `n ${n}: element ${i} (${values[i]}, bits 0x${new Uint32Array(values.buffer)[i].toString(16)}): GPU 0x${got[i].toString(16)}, reference 0x${want.bits[i].toString(16)}`,
          );
      }
      assertEqual((await gpu.read(overflow))[0], want.overflow, `n ${n}: overflow count`);
      total += want.overflow;
      gpu.release(src, overflow, dst);
    }
    assert(total > 0, 'the cases include overflowing values');
    note('overflowingValues', total);
    gpu.destroy();
  });

  t.test('f16 → f32 exact for all 65536 patterns (NaN stays NaN)', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const bits = Uint16Array.from({ length: 65536 }, (_, i) => i);
    const src = gpu.upload([65536], 'f16', bits, 'src');
    const dst = gpu.tensor([65536], 'f32', 'dst');
    await castF16ToF32(gpu, src, dst);
    const got = (await gpu.read(dst)) as Float32Array;
    const want = castF16ToF32Ref(bits);
    for (let i = 0; i < 65536; i++) {
      const ok = Number.isNaN(want[i]) ? Number.isNaN(got[i]) : Object.is(got[i], want[i]);
      if (!ok) throw new Error(`f16 0x${i.toString(16)}: GPU ${got[i]}, reference ${want[i]}`);
    }
    // An odd count: the last word's high half is not read.
    const odd = gpu.upload([5], 'f16', [0x3c00, 0x4000, 0x4200, 0x4400, 0x4500], 'odd');
    const five = gpu.tensor([5], 'f32', 'five');
    await castF16ToF32(gpu, odd, five);
    assertEqual([...(await gpu.read(five))].join(), '1,2,3,4,5', 'odd count widened');
    gpu.release(src, dst, odd, five);
    gpu.destroy();
  });

  t.test('row-split tensors: f32 and f16 parts at different rows, both directions', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    // 1 KiB bindings: rows of 6 f32 (24 B) → 42 rows per f32 part, 85 per f16 part.
    Object.defineProperty(gpu, 'maxBindingBytes', { value: 1024 });
    const rows = 200;
    const width = 6;
    const values = narrowingCases(rows * width, 9).map((x) => (Number.isFinite(x) ? x : 1));
    const src = gpu.upload([rows, width], 'f32', values, 'src');
    const overflow = gpu.zeros([1], 'u32', 'overflow');
    const half = await toF16(gpu, src, overflow, 'half');
    assert(
      src.parts.length > half.parts.length && half.parts.length > 1,
      `split differently (${src.parts.length} vs ${half.parts.length} parts)`,
    );
    const want = castF32ToF16Ref(values);
    const got = (await gpu.read(half)) as Uint16Array;
    assertEqual(got.join(), want.bits.join(), 'split f32 → f16 bits');
    assertEqual((await gpu.read(overflow))[0], want.overflow, 'split overflow count');
    const back = gpu.tensor([rows, width], 'f32', 'back');
    await castF16ToF32(gpu, half, back);
    assertEqual([...(await gpu.read(back))].join(), [...castF16ToF32Ref(want.bits)].join(), 'split f16 → f32 values');
    // Odd rows split into parts: a part would start mid-word; refused naming the tensor.
    const oddSrc = gpu.upload([200, 5], 'f32', new Float32Array(1000), 'odd-rows');
    const oddDst = gpu.tensor([200, 5], 'f16', 'odd-half');
    await assertRejects(
      () => castF32ToF16(gpu, oddSrc, oddDst, overflow),
      /f16 tensor odd-half \[200, 5\] is split into parts at an odd element/,
      'odd split refused',
    );
    gpu.release(src, overflow, half, back, oddSrc, oddDst);
    gpu.destroy();
  });

  t.test(
    'a [B, S, V] f16 batch split by sequence widens into an f32 one split over its B·S rows (the trainer widening f16 features)',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      // At 400 B an f16 [4, 20] slab (160 B) fits: the f16 batch splits by B. At 256 B an f32 slab (320 B)
      // does not: the f32 tensor splits over its B·S rows of 80 B.
      const [B, S, V] = [6, 4, 20];
      const values = narrowingCases(B * S * V, 3).map((x) => (Number.isFinite(x) && Math.abs(x) < 60000 ? x : 0.5));
      const bits = castF32ToF16Ref(values).bits;
      Object.defineProperty(gpu, 'maxBindingBytes', { value: 400, configurable: true });
      const half = gpu.upload([B, S, V], 'f16', bits, 'half');
      Object.defineProperty(gpu, 'maxBindingBytes', { value: 256, configurable: true });
      const wide = gpu.tensor([B, S, V], 'f32', 'wide');
      assert(half.splitDims === 1 && half.parts.length > 1 && wide.splitDims === 2, `f16 by B (${half.parts.length} parts), f32 by B·S`);
      await castF16ToF32(gpu, half, wide);
      assertEqual([...(await gpu.read(wide))].join(), [...castF16ToF32Ref(bits)].join(), 'widened exactly');
      const overflow = gpu.zeros([1], 'u32', 'overflow');
      const back = gpu.tensor([B, S, V], 'f16', 'back');
      Object.defineProperty(gpu, 'maxBindingBytes', { value: 400, configurable: true });
      await castF32ToF16(gpu, wide, back, overflow);
      assertEqual([...(await gpu.read(back))].join(), [...bits].join(), 'and narrowed back');
      gpu.release(half, wide, overflow, back);
      gpu.destroy();
    },
  );

  t.test('bad arguments name the tensor at fault', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const a = gpu.tensor([4], 'f32', 'a');
    const h = gpu.tensor([4], 'f16', 'h');
    const c = gpu.zeros([1], 'u32', 'count');
    await assertRejects(() => castF32ToF16(gpu, h, h, c), /castF32ToF16: src \(h \[4\]\) must be f32, got f16/, 'src dtype');
    await assertRejects(
      () => castF32ToF16(gpu, a, gpu.tensor([3], 'f16', 'short'), c),
      /dst \(short\) is \[3\], src \(a\) is \[4\]/,
      'shape',
    );
    await assertRejects(() => castF32ToF16(gpu, a, h, a), /overflow \(a \[4\]\) must be a single-part u32 tensor/, 'counter dtype');
    await assertRejects(() => castF16ToF32(gpu, a, a), /castF16ToF32: src \(a \[4\]\) must be f16, got f32/, 'f16 src');
    gpu.release(a, h, c);
    gpu.destroy();
  });
});
