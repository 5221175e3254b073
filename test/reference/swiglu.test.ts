import { Rng } from '../../src/util/random.ts';
import { swigluBackwardRef, swigluForwardRef } from '../../src/reference/swiglu.ts';
import { assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { dot, numericGradient, randomF64 } from './finite-difference.ts';

export default defineSuite('reference/swiglu', (t) => {
  t.test('dgate and dup match central differences', ({ note }) => {
    const rng = new Rng(64);
    const n = 4 * 7;
    const gate = randomF64(rng, n, 4);
    const up = randomF64(rng, n);
    const c = randomF64(rng, n);
    const analytic = swigluBackwardRef(gate, up, c);
    const dgate = numericGradient((g) => dot(c, swigluForwardRef(g, up)), gate);
    const dup = numericGradient((u) => dot(c, swigluForwardRef(gate, u)), up);
    const worst = Math.max(assertRelClose(analytic.dgate, dgate, 1e-6, 'dgate'), assertRelClose(analytic.dup, dup, 1e-6, 'dup'));
    note('worstRelErr', worst);
  });
});
