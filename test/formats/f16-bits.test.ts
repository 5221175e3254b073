/**
 * Host f16 conversions for f16 weight storage (src/formats/f16-bits.ts) against the value-level
 * float64 reference of src/reference/cast.ts: f32 and bf16 bits → f16 bits, round to nearest even,
 * over normals, subnormals, ties and the range edge; and the refusals (|x| > 65504, inf, NaN).
 */
import { bf16BitsToF16, checkF16Finite, f32ToF16Bits } from '../../src/formats/f16-bits.ts';
import { bf16ToF32 } from '../../src/formats/safetensors.ts';
import { f32ToF16Ref } from '../../src/reference/cast.ts';
import { Rng } from '../../src/util/random.ts';
import { assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** Values probing every rounding case: random magnitudes over the whole f16 range, ties, edges. */
function probeValues(): Float32Array {
  const rng = new Rng(17);
  const out: number[] = [
    0,
    -0,
    1,
    -1,
    65504,
    -65504,
    2 ** -14,
    2 ** -24,
    2 ** -25,
    2 ** -26,
    3 * 2 ** -25,
    1 + 2 ** -11,
    1 + 3 * 2 ** -11,
    65503.99,
  ];
  for (let e = -26; e <= 15; e++) {
    for (let i = 0; i < 40; i++) out.push((rng.next() < 0.5 ? -1 : 1) * 2 ** e * (1 + rng.next()));
  }
  return Float32Array.from(out.filter((x) => Math.abs(Math.fround(x)) <= 65504));
}

export default defineSuite('formats/f16-bits', (t) => {
  t.test('f32 → f16 bits equals the value-level round-to-nearest-even reference', () => {
    const values = probeValues();
    const got = f32ToF16Bits(values, 'probe');
    assertDeepEqual([...got], Array.from(values, f32ToF16Ref), `${values.length} values`);
  });

  t.test('bf16 → f16 bits equals the reference on the bf16 values', () => {
    const rng = new Rng(3);
    const bits = Uint16Array.from({ length: 4000 }, () => Math.floor(rng.next() * 0x10000));
    // Keep the finite bf16 values within the f16 range (the rest is refused, tested below).
    const inRange = bits.filter((b) => Math.abs(bf16ToF32(b)) <= 65504);
    const got = bf16BitsToF16(inRange, 'probe');
    assertDeepEqual(
      [...got],
      Array.from(inRange, (b) => f32ToF16Ref(bf16ToF32(b))),
      `${inRange.length} bf16 values`,
    );
    assertEqual(inRange.length > 1000, true, 'enough values probed');
  });

  t.test('out-of-range and non-finite values are refused naming the tensor and index', () => {
    assertThrows(
      () => f32ToF16Bits(Float32Array.of(1, 65505), 'tensor "w"'),
      /tensor "w": value 65505 at index 1 is outside the f16 range \(\|x\| > 65504\)/,
      'f32 65505',
    );
    assertThrows(
      () => f32ToF16Bits(Float32Array.of(-70000), 'tensor "w"'),
      /value -70000 at index 0 is outside the f16 range/,
      'f32 -70000',
    );
    assertThrows(() => f32ToF16Bits(Float32Array.of(0, 0, Number.NaN), 'tensor "w"'), /value NaN at index 2 is not finite/, 'f32 NaN');
    // bf16 0x4780 = 65536.
    assertThrows(
      () => bf16BitsToF16(Uint16Array.of(0x3f80, 0x4780), 'tensor "b"'),
      /tensor "b": value 65536 at index 1 is outside the f16 range/,
      'bf16 65536',
    );
    assertThrows(() => bf16BitsToF16(Uint16Array.of(0x7f80), 'tensor "b"'), /value Infinity at index 0 is not finite/, 'bf16 inf');
    assertThrows(
      () => checkF16Finite(Uint16Array.of(0x3c00, 0x7e00), 'tensor "h"'),
      /tensor "h": f16 value at index 1 \(bits 0x7e00\) is not finite/,
      'f16 NaN',
    );
    assertDeepEqual([...checkF16Finite(Uint16Array.of(0x3c00, 0x7bff), 'h')], [0x3c00, 0x7bff], 'finite f16 bits pass unchanged');
  });
});
