/** The stop policy for non-finite steps (src/training/loop/nonfinite-guard.ts); the GPU skip itself is in test/kernels/optim.test.ts. */
import { NonFiniteGuard } from '../../../src/training/loop/nonfinite-guard.ts';
import { assertEqual, assertThrows } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

export default defineSuite('training/loop/nonfinite-guard', (t) => {
  t.test('finite steps pass; each non-finite one is reported; one past the limit stops the run naming the step', () => {
    const guard = new NonFiniteGuard(2);
    assertEqual(guard.observe(1, 2.5, 0.3), undefined, 'a finite step');
    assertEqual(
      guard.observe(2, Number.NaN, 0.3),
      'step 2: loss NaN, gradient norm 0.3: not finite; the update was skipped (1 of at most 2)',
      'NaN loss',
    );
    assertEqual(
      guard.observe(3, 1.2, Number.POSITIVE_INFINITY),
      'step 3: loss 1.2, gradient norm Infinity: not finite; the update was skipped (2 of at most 2)',
      'infinite norm',
    );
    assertEqual(guard.observe(4, 1.1, 0.2), undefined, 'finite again');
    assertThrows(
      () => guard.observe(5, Number.NaN, Number.NaN),
      /^step 5: 3 optimizer steps had a non-finite loss or gradient norm \(limit --max-nonfinite-steps 2\); stopping before this step is acked/,
      'past the limit',
    );
    assertThrows(() => new NonFiniteGuard(0).observe(7, Number.NaN, 1), /^step 7: 1 optimizer steps/, 'limit 0 stops at the first');
    assertThrows(() => new NonFiniteGuard(-1), /limit must be a non-negative integer/, 'a negative limit');
  });
});
