import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { buildVocabMapping, countLossTokens, countsFromDense, usedFromD2t } from '../../src/model/eagle3/vocab-mapping.ts';
import { assertDeepEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('model/vocab-mapping', (t) => {
  t.test('docs/eagle3.md §8 worked example: V 10, D 4', () => {
    const counts = new Map([
      [7, 50],
      [2, 30],
      [9, 30],
      [5, 10],
      [3, 1],
    ]);
    const m = buildVocabMapping(counts, 10, 4);
    assertDeepEqual(Array.from(m.used), [2, 5, 7, 9], 'used');
    assertDeepEqual(Array.from(m.d2t), [2, 4, 5, 6], 'd2t');
    assertDeepEqual(Array.from(m.t2d), [0, 0, 1, 0, 0, 1, 0, 1, 0, 1], 't2d');
    assertDeepEqual(3 + m.d2t[3], 9, 'draft id 3 → target 9');
    assertDeepEqual(Array.from(usedFromD2t(m.d2t, 10)), [2, 5, 7, 9], 'used = d2t + arange(D)');
  });

  t.test('ties keep insertion order; fewer than D tokens pad with the lowest unused ids', () => {
    const tied = new Map([
      [9, 30],
      [2, 30],
      [7, 50],
      [5, 10],
      [3, 10],
    ]);
    assertDeepEqual(Array.from(buildVocabMapping(tied, 10, 2).used), [7, 9], '9 was inserted before 2');
    assertDeepEqual(Array.from(buildVocabMapping(tied, 10, 4).used), [2, 5, 7, 9], '5 was inserted before 3');
    const few = new Map([
      [8, 3],
      [1, 2],
    ]);
    assertDeepEqual(Array.from(buildVocabMapping(few, 10, 4).used), [0, 1, 2, 8], 'pad with 0 and 2');
    assertDeepEqual(Array.from(buildVocabMapping(new Map(), 5, 5).d2t), [0, 0, 0, 0, 0], 'D = V is the identity');
  });

  t.test('counting over loss-masked positions, in first-appearance order', () => {
    const counts = countLossTokens([4, 1, 4, 2, 1, 3], [1, 1, 1, 0, 1, 0], 5);
    assertDeepEqual(
      [...counts],
      [
        [4, 2],
        [1, 2],
      ],
      'counts',
    );
    assertThrows(() => countLossTokens([0, 7], [1, 1], 5), /inputIds\[1\] = 7 is outside the vocabulary/, 'bad id');
    assertThrows(() => buildVocabMapping(new Map([[1, 1]]), 4, 5), /draftVocab must be an integer in \[1, vocab=4\]/, 'D > V');
    assertThrows(() => buildVocabMapping(new Map([[4, 1]]), 4, 2), /token id 4 is outside/, 'id ≥ V');
    assertThrows(() => usedFromD2t([0, -1], 4), /strictly ascending/, 'd2t not ascending');
  });

  t.test('reproduces the fixture t2d / d2t from vocab.counts', async ({ fixture }) => {
    const f = new SafetensorsFile(await fixture('eagle3/eagle3_reference.safetensors'), 'eagle3_reference');
    const V = f.shape('t2d')[0];
    const D = f.shape('d2t')[0];
    // facts.json: SpecForge got its Counter from unique(return_counts=True), i.e. ascending id order.
    // That order matters here: several ids tie at the D-th count.
    const m = buildVocabMapping(countsFromDense(f.i32('vocab.counts')), V, D);
    assertDeepEqual(Array.from(m.t2d), Array.from(f.i32('t2d')), 't2d');
    assertDeepEqual(Array.from(m.d2t), Array.from(f.i32('d2t')), 'd2t');
    assertDeepEqual(
      m.t2d.reduce((a, b) => a + b, 0),
      D,
      't2d.sum() == D',
    );
    const nonzero = Array.from(m.t2d.keys()).filter((v) => m.t2d[v] === 1);
    assertDeepEqual(nonzero, Array.from(usedFromD2t(f.i32('d2t'), V)), 'nonzero(t2d) == d2t + arange(D)');
  });
});
