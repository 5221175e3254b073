/** badElement (src/training/checkpoints/tensor-finiteness.ts): the first NaN, infinity or (for a second moment) negative value, by index. */
import { badElement } from '../../../src/training/checkpoints/tensor-finiteness.ts';
import { assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

export default defineSuite('training/checkpoints/tensor-finiteness', (t) => {
  t.test('finite values pass; NaN, ±Infinity and negative second moments are named with their index', () => {
    assertEqual(badElement(Float32Array.from([0, -1.5, 3e38, -0])), undefined, 'finite, negative allowed');
    assertEqual(badElement(new Float32Array(0)), undefined, 'empty');
    assertEqual(badElement(Float32Array.from([1, 2, Number.NaN, Infinity])), 'NaN at element 2', 'the first NaN');
    assertEqual(badElement(Float32Array.from([1, Infinity])), 'Infinity at element 1', 'infinity');
    assertEqual(badElement(Float32Array.from([-Infinity])), '-Infinity at element 0', 'negative infinity');
    assertEqual(badElement(Float32Array.from([0, 1, -0.5]), true), 'the negative value -0.5 at element 2', 'negative second moment');
    assertEqual(badElement(Float32Array.from([0, -0]), true), undefined, 'negative zero is not negative');
  });
});
