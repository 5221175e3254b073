/**
 * The chi-square goodness-of-fit test and the functions under it: ln Γ (Lanczos), the regularized
 * incomplete gamma functions P(a, x) and Q(a, x) = 1 − P(a, x), and the chi-square CDF and upper
 * tail (the p-value). Written here rather than taken from a package: it is ~60 lines, runs unchanged
 * in Node, Deno and a tab, and computes the upper tail directly (continued fraction), so p-values far
 * below 1e-16 (a wrong sampler over thousands of draws) are exact instead of 1 − 1 = 0.
 * Algorithms: the series and Lentz continued fraction of Numerical Recipes §6.2; Lanczos g = 7, n = 9.
 */

const LANCZOS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905,
  -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
];

/** ln Γ(x) for x > 0 (about 15 significant digits). */
export function lnGamma(x: number): number {
  if (!(x > 0)) throw new RangeError(`lnGamma: x must be positive, got ${x}`);
  // Reflection keeps the series accurate for small x: Γ(x)Γ(1 − x) = π / sin(πx).
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x);
  const z = x - 1;
  let s = LANCZOS[0];
  for (let i = 1; i < LANCZOS.length; i++) s += LANCZOS[i] / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(s);
}

const EPS = 1e-15;
const MAX_ITER = 10_000;

/** Regularized lower incomplete gamma P(a, x) = γ(a, x) / Γ(a), a > 0, x ≥ 0. */
export function regularizedGammaP(a: number, x: number): number {
  check(a, x);
  if (x === 0) return 0;
  return x < a + 1 ? gammaSeries(a, x) : 1 - gammaContinuedFraction(a, x);
}

/** Regularized upper incomplete gamma Q(a, x) = Γ(a, x) / Γ(a) = 1 − P(a, x). */
export function regularizedGammaQ(a: number, x: number): number {
  check(a, x);
  if (x === 0) return 1;
  return x < a + 1 ? 1 - gammaSeries(a, x) : gammaContinuedFraction(a, x);
}

function check(a: number, x: number): void {
  if (!(a > 0 && Number.isFinite(a))) throw new RangeError(`incomplete gamma: a must be a finite positive number, got ${a}`);
  if (!(x >= 0)) throw new RangeError(`incomplete gamma: x must be ≥ 0, got ${x}`);
}

/** P(a, x) by its series Σ xⁿ / (a (a+1) … (a+n)), converging fast for x < a + 1. */
function gammaSeries(a: number, x: number): number {
  let term = 1 / a;
  let sum = term;
  for (let n = 1; n < MAX_ITER; n++) {
    term *= x / (a + n);
    sum += term;
    if (Math.abs(term) < Math.abs(sum) * EPS) return sum * Math.exp(-x + a * Math.log(x) - lnGamma(a));
  }
  throw new Error(`incomplete gamma: the series did not converge for a = ${a}, x = ${x}`);
}

/** Q(a, x) by its continued fraction (modified Lentz), converging fast for x ≥ a + 1. */
function gammaContinuedFraction(a: number, x: number): number {
  const tiny = 1e-300;
  let b = x + 1 - a;
  let c = 1 / tiny;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < MAX_ITER; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < EPS) return Math.exp(-x + a * Math.log(x) - lnGamma(a)) * h;
  }
  throw new Error(`incomplete gamma: the continued fraction did not converge for a = ${a}, x = ${x}`);
}

/** P(X ≤ x) for X ~ χ²(df). */
export function chiSquareCdf(x: number, df: number): number {
  if (!(df > 0)) throw new RangeError(`chiSquareCdf: df must be positive, got ${df}`);
  return x <= 0 ? 0 : regularizedGammaP(df / 2, x / 2);
}

/** P(X > x) for X ~ χ²(df): the p-value of a statistic x. */
export function chiSquareSurvival(x: number, df: number): number {
  if (!(df > 0)) throw new RangeError(`chiSquareSurvival: df must be positive, got ${df}`);
  if (x === Number.POSITIVE_INFINITY) return 0;
  return x <= 0 ? 1 : regularizedGammaQ(df / 2, x / 2);
}

export interface ChiSquareResult {
  /** Σ (observed − expected)² / expected over the bins. */
  readonly statistic: number;
  /** Bins − 1. */
  readonly df: number;
  readonly pValue: number;
  /** Bins after pooling the small ones. */
  readonly bins: number;
}

/**
 * Pearson's goodness-of-fit test of `counts` against the probabilities `probs` (same length, summing
 * to 1). Cells expected below `minExpected` (default 5, the usual validity rule) are pooled into one
 * bin; a count in a cell of probability 0 makes the statistic infinite (p-value 0): such a draw is
 * impossible under the hypothesis.
 */
export function chiSquareGoodnessOfFit(counts: readonly number[], probs: readonly number[], minExpected = 5): ChiSquareResult {
  if (counts.length !== probs.length) throw new Error(`chiSquareGoodnessOfFit: ${counts.length} counts but ${probs.length} probabilities`);
  const n = counts.reduce((a, b) => a + b, 0);
  const total = probs.reduce((a, b) => a + b, 0);
  if (!(n > 0)) throw new Error('chiSquareGoodnessOfFit: no observations');
  if (probs.some((p) => !(p >= 0)) || Math.abs(total - 1) > 1e-9)
    throw new Error(`chiSquareGoodnessOfFit: probabilities must be ≥ 0 and sum to 1 (sum ${total})`);
  const observed: number[] = [];
  const expected: number[] = [];
  let pooledObserved = 0;
  let pooledExpected = 0;
  let impossible = false;
  for (let i = 0; i < counts.length; i++) {
    const e = probs[i] * n;
    if (probs[i] === 0) impossible ||= counts[i] > 0;
    else if (e < minExpected) {
      pooledObserved += counts[i];
      pooledExpected += e;
    } else {
      observed.push(counts[i]);
      expected.push(e);
    }
  }
  if (pooledExpected > 0) {
    observed.push(pooledObserved);
    expected.push(pooledExpected);
  }
  const df = expected.length - 1;
  if (df < 1) throw new Error(`chiSquareGoodnessOfFit: ${expected.length} bin(s) after pooling; at least 2 are needed`);
  const statistic = impossible ? Number.POSITIVE_INFINITY : observed.reduce((s, o, i) => s + (o - expected[i]) ** 2 / expected[i], 0);
  return { statistic, df, pValue: chiSquareSurvival(statistic, df), bins: expected.length };
}
