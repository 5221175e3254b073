/**
 * src/util/statistics.ts against reference values (SciPy 1.17 `scipy.special` / `scipy.stats.chi2`,
 * float64): ln Γ, P(a, x) and Q(a, x) on both sides of x = a + 1 (series and continued fraction), the
 * chi-square CDF at the 95% quantiles and an upper tail of 1.6e-63, and the goodness-of-fit test.
 */
import {
  chiSquareCdf,
  chiSquareGoodnessOfFit,
  chiSquareSurvival,
  lnGamma,
  regularizedGammaP,
  regularizedGammaQ,
} from '../../src/util/statistics.ts';
import { assert, assertEqual, assertRelClose, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const close = (got: number, want: number, tol: number, what: string) => assertRelClose([got], [want], tol, what);

export default defineSuite('util/statistics', (t) => {
  t.test('ln Γ and the regularized incomplete gamma functions equal SciPy', () => {
    close(lnGamma(0.5), 0.5723649429247, 1e-12, 'lnΓ(0.5) = ln √π');
    close(lnGamma(10.3), 13.482036786138359, 1e-13, 'lnΓ(10.3)');
    close(lnGamma(1e-3), 6.907178885383853, 1e-13, 'lnΓ(0.001) (reflection)');
    close(lnGamma(11), Math.log(3628800), 1e-13, 'lnΓ(11) = ln 10!');
    close(regularizedGammaP(2.5, 1.7), 0.36143007689620493, 1e-12, 'P(2.5, 1.7) (series)');
    close(regularizedGammaQ(12, 30), 6.387702539927327e-5, 1e-11, 'Q(12, 30) (continued fraction)');
    for (const x of [0.1, 1, 4, 20]) close(regularizedGammaP(1, x), 1 - Math.exp(-x), 1e-12, `P(1, ${x}) = 1 − e^−x`);
    assertEqual(regularizedGammaP(3, 0), 0, 'P(a, 0)');
    assertThrows(() => regularizedGammaP(0, 1), /a must be a finite positive number/, 'a = 0');
    assertThrows(() => lnGamma(-1), /x must be positive/, 'lnΓ(−1)');
  });

  t.test('chi-square CDF and upper tail: 95% quantiles, small and huge statistics', () => {
    close(chiSquareCdf(3.841458820694124, 1), 0.95, 1e-12, 'cdf(3.84, 1)');
    close(chiSquareCdf(5.991464547107979, 2), 0.95, 1e-12, 'cdf(5.99, 2)');
    close(chiSquareCdf(18.307038053275146, 10), 0.95, 1e-12, 'cdf(18.31, 10)');
    close(chiSquareCdf(0.5, 1), 0.5204998778130466, 1e-12, 'cdf(0.5, 1)');
    close(chiSquareCdf(1, 3), 0.19874804309879915, 1e-12, 'cdf(1, 3)');
    close(chiSquareCdf(0.001, 4), 1.2495834114479173e-7, 1e-10, 'cdf(0.001, 4)');
    close(chiSquareCdf(60, 60), 0.52428301389368, 1e-11, 'cdf(60, 60)');
    close(chiSquareSurvival(30, 7.5), 1.4301587882904854e-4, 1e-10, 'sf(30, 7.5)');
    close(chiSquareSurvival(100, 10), 5.4497019829205215e-17, 1e-10, 'sf(100, 10): no cancellation');
    close(chiSquareSurvival(400, 35), 1.6316650942091539e-63, 1e-9, 'sf(400, 35)');
    assertEqual(chiSquareSurvival(Number.POSITIVE_INFINITY, 3), 0, 'sf(∞)');
    assertEqual(chiSquareCdf(0, 3), 0, 'cdf(0)');
  });

  t.test('goodness of fit: the statistic by hand, pooling of small cells, impossible counts', () => {
    // 3 bins, n = 100, expected 50/30/20: (55−50)²/50 + (25−30)²/30 + (20−20)²/20 = 0.5 + 0.8333…
    const r = chiSquareGoodnessOfFit([55, 25, 20], [0.5, 0.3, 0.2]);
    close(r.statistic, 0.5 + 25 / 30, 1e-14, 'statistic');
    assertEqual(r.df, 2, 'df');
    close(r.pValue, Math.exp(-r.statistic / 2), 1e-12, 'df 2: p = e^(−x/2)');
    // Cells expected 2 and 3 (< 5) are pooled into one bin of 5.
    const pooled = chiSquareGoodnessOfFit([50, 45, 3, 2], [0.5, 0.45, 0.03, 0.02]);
    assertEqual(pooled.bins, 3, 'two small cells pooled');
    close(pooled.statistic, 0, 1e-14, 'a perfect fit');
    assertEqual(pooled.pValue, 1, 'p-value of a perfect fit');
    const impossible = chiSquareGoodnessOfFit([50, 49, 1], [0.5, 0.5, 0]);
    assertEqual(impossible.pValue, 0, 'a count in a probability-0 cell');
    assert(chiSquareGoodnessOfFit([50, 50, 0], [0.5, 0.5, 0]).pValue > 0.99, 'an empty probability-0 cell is fine');
    assertThrows(() => chiSquareGoodnessOfFit([1, 2], [0.5, 0.6]), /sum to 1/, 'probabilities not summing to 1');
    assertThrows(() => chiSquareGoodnessOfFit([1, 2], [0.5]), /2 counts but 1 probabilities/, 'lengths');
  });
});
