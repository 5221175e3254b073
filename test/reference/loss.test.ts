import { hardCrossEntropyRef, shiftRowsRef, softCrossEntropyRef, teacherRef } from '../../src/reference/loss.ts';
import { Rng } from '../../src/util/random.ts';
import { assertDeepEqual, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** Central differences of f at x, one coordinate at a time (float64, tiny shapes only). */
function numericGrad(f: (x: Float64Array) => number, x: Float64Array, h = 1e-5): Float64Array {
  const g = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const keep = x[i];
    x[i] = keep + h;
    const up = f(x);
    x[i] = keep - h;
    const down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

function randomDistribution(rng: Rng, rows: number, width: number, total = 1): Float64Array {
  const p = new Float64Array(rows * width);
  for (let r = 0; r < rows; r++) {
    let sum = 0;
    for (let j = 0; j < width; j++) sum += p[r * width + j] = rng.uniform(0.05, 1);
    for (let j = 0; j < width; j++) p[r * width + j] *= total / sum;
  }
  return p;
}

export default defineSuite('reference/loss', (t) => {
  t.test('soft cross-entropy backward matches finite differences (normalised and unnormalised p)', ({ note }) => {
    const rng = new Rng(5);
    const [rows, D] = [4, 5];
    let worst = 0;
    for (const total of [1, 1.3]) {
      const z = Float64Array.from(rng.floats(rows * D, 2));
      const p = randomDistribution(rng, rows, D, total);
      const mask = [1, 0, 1, 1];
      const [denominator, gradScale] = [7, 0.64];
      const { grad } = softCrossEntropyRef(z, p, mask, rows, D, denominator, gradScale);
      const fd = numericGrad((x) => gradScale * softCrossEntropyRef(x, p, mask, rows, D, denominator).loss, z);
      worst = Math.max(worst, assertRelClose(grad, fd, 1e-6, `soft CE grad (Σp = ${total})`));
      assertDeepEqual(Array.from(grad.slice(D, 2 * D)), [0, 0, 0, 0, 0], 'masked row has zero gradient');
    }
    note('worstRelErr', worst);
  });

  t.test('hard cross-entropy backward matches finite differences (ignored rows, count denominator)', ({ note }) => {
    const rng = new Rng(6);
    const [rows, V] = [5, 6];
    const x = Float64Array.from(rng.floats(rows * V, 3));
    const labels = [2, -1, 0, 5, -100];
    const ref = hardCrossEntropyRef(x, labels, rows, V, undefined, 0.5);
    assertDeepEqual(ref.count, 3, 'non-negative labels');
    const fd = numericGrad((y) => 0.5 * hardCrossEntropyRef(y, labels, rows, V).loss, x);
    note('relErr', assertRelClose(ref.grad, fd, 1e-6, 'hard CE grad'));
    // Hand value for one row: −log_softmax([0, ln 3])[1] = ln(4/3).
    assertRelClose([hardCrossEntropyRef([0, Math.log(3)], [1], 1, 2).loss], [Math.log(4 / 3)], 1e-12, 'hand value');
  });

  t.test('TTT shift stays inside each sequence and pads the tail', () => {
    // B = 2 sequences of S = 3 rows, width 2; rows a0 a1 a2 | b0 b1 b2.
    const x = [10, 11, 20, 21, 30, 31, 40, 41, 50, 51, 60, 61];
    assertDeepEqual(Array.from(shiftRowsRef(x, 6, 2, 3, 1, -1)), [20, 21, 30, 31, -1, -1, 50, 51, 60, 61, -1, -1], 'step 1');
    assertDeepEqual(Array.from(shiftRowsRef(x, 6, 2, 3, 2, 0)), [30, 31, 0, 0, 0, 0, 60, 61, 0, 0, 0, 0], 'step 2');
    assertDeepEqual(Array.from(shiftRowsRef(x, 6, 2, 3, 0, 0)), x, 'step 0 is the identity');
  });

  t.test('teacher on a hand example: tie → lowest id, renormalised p, unrenormalised p̃', () => {
    // V = 4, draft vocab = target ids {0, 2}; the max 3 is tied at ids 1 and 2, so tok = 1 (not drafted).
    const logits = [0, 3, 3, Math.log(2)];
    const th = teacherRef(logits, [1, 0, 1, 0], [0, 2], [1], 1, 4);
    assertDeepEqual(Array.from(th.tok), [1], 'tok');
    assertDeepEqual(Array.from(th.positionMask), [0], 'position mask (tok outside the draft vocab)');
    const z = 1 + 2 * Math.exp(3) + 2;
    assertRelClose(th.p, [1 / (1 + Math.exp(3)), Math.exp(3) / (1 + Math.exp(3))], 1e-12, 'p');
    assertRelClose(th.pTilde, [1 / z, Math.exp(3) / z], 1e-12, 'p̃');
  });
});
