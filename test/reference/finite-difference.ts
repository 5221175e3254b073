/**
 * Central finite differences in float64, for checking the analytic backward of each reference:
 * with a random projection c of the output, L(x) = Σ c ⊙ f(x) has gradient backward(c), and
 * ∂L/∂x_i ≈ (L(x + h e_i) − L(x − h e_i)) / 2h with error O(h²).
 */
import { Rng } from '../../src/util/random.ts';

export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** Numerical gradient of the scalar `loss` with respect to every element of `x` (x is restored). */
export function numericGradient(loss: (x: Float64Array) => number, x: Float64Array, h = 1e-5): Float64Array {
  const grad = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const saved = x[i];
    x[i] = saved + h;
    const plus = loss(x);
    x[i] = saved - h;
    const minus = loss(x);
    x[i] = saved;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

/** Float64 values uniform in [-scale, scale] (the references take float64 inputs here). */
export function randomF64(rng: Rng, n: number, scale = 1): Float64Array {
  return Float64Array.from({ length: n }, () => rng.uniform(-scale, scale));
}
