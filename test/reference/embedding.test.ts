import { embeddingBackwardRef, embeddingForwardRef } from '../../src/reference/embedding.ts';
import { Rng } from '../../src/util/random.ts';
import { assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { dot, numericGradient, randomF64 } from './finite-difference.ts';

export default defineSuite('reference/embedding', (t) => {
  t.test('backward matches central differences (repeated and padding ids)', ({ note }) => {
    const rng = new Rng(61);
    const args = { vocab: 5, hidden: 3 };
    const ids = Int32Array.from([2, 0, 2, -1, 4, 2, 5, 0]);
    const table = randomF64(rng, args.vocab * args.hidden);
    const c = randomF64(rng, ids.length * args.hidden);
    const numeric = numericGradient((tb) => dot(c, embeddingForwardRef(tb, ids, args)), table);
    note('relErr', assertRelClose(embeddingBackwardRef(ids, c, args), numeric, 1e-6, 'dTable'));
  });
});
