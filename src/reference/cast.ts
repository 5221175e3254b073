/**
 * Float64 reference of the f32 ↔ f16 casts (src/kernels/cast.ts), written from the values rather
 * than the bits so that it checks the kernels' integer rounding independently:
 *   f16(x) = the f16 nearest to x, ties to the even significand; magnitudes that round past 65504
 *            are ±inf, NaN is the quiet NaN 0x7e00, and the sign of zero is kept.
 *   overflow(x) = |x| > 65504 or x not finite (what the capture refuses).
 * f16 → f32 is exact: every f16 is an f32.
 */

const F16_MAX = 65504;
const MIN_NORMAL = 2 ** -14;
const SUBNORMAL_STEP = 2 ** -24;

/** Round half to even of a non-negative float64. */
function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const r = x - f;
  if (r > 0.5) return f + 1;
  if (r < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** f16 bits of the f32 value `x` (x must already be an f32, e.g. read from a Float32Array). */
export function f32ToF16Ref(x: number): number {
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a < MIN_NORMAL) {
    // Subnormal range: a multiple of 2^-24 (the last step may carry into the smallest normal, 0x0400).
    return sign | roundHalfEven(a / SUBNORMAL_STEP);
  }
  if (a === Infinity) return sign | 0x7c00;
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--; // log2 of values just below a power of two can round up
  if (2 ** (e + 1) <= a) e++;
  // 11 significant bits: a / 2^(e-10) lies in [1024, 2048); rounding may reach 2048 (next binade).
  let m = roundHalfEven(a / 2 ** (e - 10));
  if (m === 2048) {
    m = 1024;
    e++;
  }
  if (e > 15) return sign | 0x7c00; // past 65504 = 2^15 · (1 + 1023/1024)
  return sign | ((e + 15) << 10) | (m - 1024);
}

/** The f32 value of f16 bits. */
export function f16ToF32Ref(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const frac = bits & 0x3ff;
  if (exp === 0) return sign * frac * SUBNORMAL_STEP;
  if (exp === 31) return frac ? Number.NaN : sign * Infinity;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

/** Whether the capture refuses `x` as an f16 feature value. */
export function overflowsF16(x: number): boolean {
  return !Number.isFinite(x) || Math.abs(x) > F16_MAX;
}

/** f16 bits of every value, and how many overflow. */
export function castF32ToF16Ref(values: ArrayLike<number>): { bits: Uint16Array; overflow: number } {
  const bits = new Uint16Array(values.length);
  let overflow = 0;
  for (let i = 0; i < values.length; i++) {
    bits[i] = f32ToF16Ref(values[i]);
    if (overflowsF16(values[i])) overflow++;
  }
  return { bits, overflow };
}

/** The values of f16 bits as f32. */
export function castF16ToF32Ref(bits: ArrayLike<number>): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = f16ToF32Ref(bits[i]);
  return out;
}
