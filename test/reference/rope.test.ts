import { Rng } from '../../src/util/random.ts';
import { ropeBackwardRef, ropeForwardRef } from '../../src/reference/rope.ts';
import { assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { dot, numericGradient, randomF64 } from './finite-difference.ts';

export default defineSuite('reference/rope', (t) => {
  t.test('backward (inverse rotation) matches central differences', ({ note }) => {
    const rng = new Rng(63);
    const args = { rows: 3, nHeads: 2, headDim: 6, theta: 10000, posOffset: 2 };
    const positions = Int32Array.from([0, 7, 31]);
    const x = randomF64(rng, args.rows * args.nHeads * args.headDim);
    const c = randomF64(rng, x.length);
    const numeric = numericGradient((xx) => dot(c, ropeForwardRef(xx, positions, args)), x);
    note('relErr', assertRelClose(ropeBackwardRef(c, positions, args), numeric, 1e-6, 'dx'));
  });
});
