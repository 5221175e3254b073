import { Rng } from '../../src/util/random.ts';
import { rmsnormBackwardRef, rmsnormForwardRef } from '../../src/reference/rmsnorm.ts';
import { assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { dot, numericGradient, randomF64 } from './finite-difference.ts';

export default defineSuite('reference/rmsnorm', (t) => {
  t.test('dx and dw match central differences', ({ note }) => {
    const rng = new Rng(62);
    let worst = 0;
    for (const args of [
      { rows: 3, hidden: 5, eps: 1e-6 },
      { rows: 2, hidden: 7, eps: 0.1 },
    ]) {
      const x = randomF64(rng, args.rows * args.hidden);
      const w = randomF64(rng, args.hidden).map((v) => 1 + v / 2);
      const c = randomF64(rng, args.rows * args.hidden);
      const analytic = rmsnormBackwardRef(x, w, c, args);
      const dx = numericGradient((xx) => dot(c, rmsnormForwardRef(xx, w, args).y), x);
      const dw = numericGradient((ww) => dot(c, rmsnormForwardRef(x, ww, args).y), w);
      worst = Math.max(worst, assertRelClose(analytic.dx, dx, 1e-6, `dx eps ${args.eps}`));
      worst = Math.max(worst, assertRelClose(analytic.dw, dw, 1e-6, `dw eps ${args.eps}`));
    }
    note('worstRelErr', worst);
  });
});
