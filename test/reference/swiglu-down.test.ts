/**
 * The float64 reference of the fused SwiGLU down projection (src/reference/swiglu-down.ts): its
 * gradients match central differences of its forward, for gu and W.
 */
import { swigluDownForwardRef, swigluDownGradsRef } from '../../src/reference/swiglu-down.ts';
import { Rng } from '../../src/util/random.ts';
import { assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { dot, numericGradient, randomF64 } from './finite-difference.ts';

export default defineSuite('reference/swiglu-down', (t) => {
  t.test('dgu and dW match central differences of hOut', ({ note }) => {
    const rng = new Rng(65);
    const s = { rows: 3, inter: 5, hidden: 4 };
    const gu = randomF64(rng, s.rows * 2 * s.inter, 3);
    const w = randomF64(rng, s.hidden * s.inter);
    const h1 = randomF64(rng, s.rows * s.hidden);
    const dy = randomF64(rng, s.rows * s.hidden);
    const dw0 = randomF64(rng, s.hidden * s.inter);
    const analytic = swigluDownGradsRef(dy, w, gu, dw0, s);
    const dgu = numericGradient((x) => dot(dy, swigluDownForwardRef(x, w, h1, s)), gu);
    const dwNumeric = numericGradient((x) => dot(dy, swigluDownForwardRef(gu, x, h1, s)), w);
    // The reference accumulates onto dw0: subtract it to compare the gradient alone.
    const dw = analytic.dw.map((v, i) => v - dw0[i]);
    const worst = Math.max(assertRelClose(analytic.dgu, dgu, 1e-6, 'dgu'), assertRelClose(dw, dwNumeric, 1e-6, 'dW'));
    note('worstRelErr', worst);
  });
});
