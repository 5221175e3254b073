/**
 * Host conversions to IEEE binary16 bits for weights stored as f16 on the GPU, bits to bits (no
 * Float32Array of the whole tensor in between): f32 bits → f16 bits rounding to nearest, ties to
 * even, and bf16 bits (the top half of an f32) through the same rounding. A finite value beyond the
 * f16 range (|x| > 65504) would become ±inf and poison every product, and a NaN or inf weight makes
 * every output garbage, so both are refused with a one-line error naming the tensor.
 */

/** f32 bits of 65504, the largest finite f16; any larger magnitude is refused. */
const F32_BITS_F16_MAX = 0x477fe000;

/** f16 bits of the f32 whose bits are `x` (|x| ≤ 65504 and finite; the caller checks). */
function f32BitsToF16Bits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp <= 101) return sign; // below 2^-25: rounds to zero (2^-25 itself ties to the even zero)
  if (exp <= 112) {
    // Subnormal f16: the value in units of 2^-24, rounded half to even.
    const full = mant | 0x800000;
    const shift = 126 - exp;
    let half = full >>> shift;
    const rem = full & ((1 << shift) - 1);
    const tie = 1 << (shift - 1);
    if (rem > tie || (rem === tie && (half & 1) === 1)) half++;
    return sign | half;
  }
  let half = ((exp - 112) << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the significand increments the exponent, which is the correct rounding.
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half++;
  return sign | half;
}

function refuse(x: number, index: number, what: string): never {
  const view = new DataView(new ArrayBuffer(4));
  view.setUint32(0, x >>> 0, true);
  const value = view.getFloat32(0, true);
  const why = Number.isFinite(value) ? `outside the f16 range (|x| > 65504)` : 'not finite';
  throw new Error(`${what}: value ${value} at index ${index} is ${why}; it cannot be stored as f16 (load it with f32 weight precision)`);
}

/** f16 bits of f32 bits, refusing non-finite and out-of-range values. `what` names the tensor. */
export function f32BitsToF16(bits: Uint32Array, what: string): Uint16Array {
  const out = new Uint16Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i];
    if ((x & 0x7fffffff) > F32_BITS_F16_MAX) refuse(x, i, what);
    out[i] = f32BitsToF16Bits(x);
  }
  return out;
}

/** f16 bits of f32 values (e.g. a synthetic or already-widened checkpoint). */
export function f32ToF16Bits(values: Float32Array, what: string): Uint16Array {
  return f32BitsToF16(new Uint32Array(values.buffer, values.byteOffset, values.length), what);
}

/**
 * f16 bits of bf16 bits. bf16's 8-bit significand fits f16's 11, so normal f16 values convert
 * exactly; only magnitudes below 2^-14 (f16 subnormals) round, half to even.
 */
export function bf16BitsToF16(bits: Uint16Array, what: string): Uint16Array {
  const out = new Uint16Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i] << 16;
    if ((x & 0x7fffffff) > F32_BITS_F16_MAX) refuse(x, i, what);
    out[i] = f32BitsToF16Bits(x >>> 0);
  }
  return out;
}

/** Refuses f16 bits holding inf or NaN (exponent all ones); returns the bits unchanged. */
export function checkF16Finite(bits: Uint16Array, what: string): Uint16Array {
  for (let i = 0; i < bits.length; i++) {
    if ((bits[i] & 0x7c00) === 0x7c00) throw new Error(`${what}: f16 value at index ${i} (bits 0x${bits[i].toString(16)}) is not finite`);
  }
  return bits;
}
