/**
 * The cases the matmul tests share (./matmul.test.ts, ./matmul-f16w.test.ts): shapes, layouts and the
 * f16 weights with the rounded values a reference multiplies by.
 */
import { f32ToF16Bits } from '../../src/formats/f16-bits.ts';
import { f16ToF32 } from '../../src/formats/safetensors.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { matmul, MATMUL_TOLERANCE } from '../../src/kernels/matmul.ts';

/**
 * Shapes chosen to end in partial tiles of every variant (MATMUL_GEOMETRY; checked by a test below)
 * as well as to fill tiles exactly, to include degenerate edges, odd K (the subgroup kernel steps K
 * by two) and several tiles in both directions.
 */
export const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [37, 53, 29],
  [64, 64, 64],
  [65, 17, 130],
  [128, 96, 33],
  [7, 200, 3],
  [131, 70, 67],
  // Multiples of 4 in every dimension (subgroup-vec4's vec4 reads) ending in partial 32 x 32 tiles.
  [4, 4, 4],
  [36, 52, 28],
  [68, 100, 132],
  [132, 72, 68],
];

/** Test name suffix stating the tolerance of variants held to less than f32 accuracy. */
export const toleranceTag = (variant: keyof typeof MATMUL_TOLERANCE) =>
  MATMUL_TOLERANCE[variant] > 1e-5 ? ` (f16 operands, rel. err. <= ${MATMUL_TOLERANCE[variant]})` : '';
/**
 * Weights stored as f16 are held to the f32 variants' 1e-5 against the float64 reference computed
 * on the f16-rounded weights (the kernels widen each weight exactly and then do f32 arithmetic).
 */
export const F16W_TOL = 1e-5;

/** f16 bits of `b` for upload, and the f16-rounded values the reference multiplies by. */
export function f16Weights(b: Float32Array): { bits: Uint16Array; rounded: Float64Array } {
  const bits = f32ToF16Bits(b, 'test weight');
  return { bits, rounded: Float64Array.from(bits, f16ToF32) };
}

/** Single-row shapes: N and K crossing gemv's tile and lane counts, odd N, a decode-like K. */
export const GEMV_SHAPES: [number, number][] = [
  [1, 2],
  [3, 130],
  [37, 66],
  [200, 1030],
  [513, 2048],
  // K a multiple of 8 (gemv-vec4 reads four f32 or eight f16 weights per load).
  [9, 8],
  [37, 72],
  [200, 1032],
];

export const LAYOUTS = [
  { transA: false, transB: false, tag: 'NN' },
  { transA: false, transB: true, tag: 'NT (X·Wᵀ)' },
  { transA: true, transB: false, tag: 'TN (dYᵀ·X)' },
  { transA: true, transB: true, tag: 'TT' },
];

/**
 * For each of LAYOUTS, the first element of C where subgroup-vec4 differs from subgroup in its bits
 * (-1: none), batched with alpha 0.75 and beta 0.5; B is uploaded as `b.dtype` (f32, or f16 bits).
 */
export async function vec4BitDifferences(
  gpu: Gpu,
  dims: { M: number; N: number; K: number; batch: number },
  a: Float32Array,
  b: { dtype: 'f32'; data: Float32Array } | { dtype: 'f16'; data: Uint16Array },
  c0: Float32Array,
): Promise<{ tag: string; differ: number }[]> {
  const { M, N, K, batch } = dims;
  const result: { tag: string; differ: number }[] = [];
  for (const layout of LAYOUTS) {
    const out: Float32Array[] = [];
    for (const variant of ['subgroup', 'subgroup-vec4'] as const) {
      const A = gpu.upload([a.length], 'f32', a);
      const B = gpu.upload([b.data.length], b.dtype, b.data);
      const C = gpu.upload([c0.length], 'f32', c0);
      await matmul(gpu, A, B, C, { M, N, K }, { ...layout, batch, alpha: 0.75, beta: 0.5, variant });
      out.push((await gpu.read(C)).slice() as Float32Array);
      gpu.release(A, B, C);
    }
    result.push({ tag: layout.tag, differ: out[0].findIndex((v, i) => !Object.is(v, out[1][i])) });
  }
  return result;
}
