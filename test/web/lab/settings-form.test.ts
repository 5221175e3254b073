/** The lab's settings check (web/lab/settings-form.ts): a value against its input's stated min, max and step. */
import { numberProblem } from '../../../web/lab/settings-form.ts';
import { assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

export default defineSuite('web/lab/settings-form', (t) => {
  t.test('values outside the stated min / max, fractions of whole-number inputs and non-numbers are refused naming the input', () => {
    const ttt = { min: 1, max: 8, integer: true };
    assertEqual(numberProblem('TTT length', '12', ttt), 'TTT length: at most 8 (got 12)', 'above max');
    assertEqual(numberProblem('TTT length', '0', ttt), 'TTT length: at least 1 (got 0)', 'below min');
    assertEqual(numberProblem('TTT length', '2.5', ttt), 'TTT length: a whole number, please (got 2.5)', 'a fraction');
    assertEqual(numberProblem('TTT length', '', ttt), 'TTT length: enter a number', 'empty');
    assertEqual(numberProblem('TTT length', 'abc', ttt), 'TTT length: enter a number', 'not a number');
    assertEqual(numberProblem('TTT length', '8', ttt), undefined, 'the max itself');
    assertEqual(numberProblem('TTT length', ' 1 ', ttt), undefined, 'the min, with spaces');
  });

  t.test('fractional inputs (step="any") take fractions within their limits', () => {
    const lr = { min: 0.00001, max: 0.1, integer: false };
    assertEqual(numberProblem('Learning rate', '0.003', lr), undefined, 'a fraction');
    assertEqual(numberProblem('Learning rate', '3e-3', lr), undefined, 'exponent notation');
    assertEqual(numberProblem('Learning rate', '0.5', lr), 'Learning rate: at most 0.1 (got 0.5)', 'above max');
  });
});
