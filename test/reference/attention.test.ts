/**
 * Checks of the float64 attention references themselves: the analytic backward against central
 * finite differences of the forward, the literal TTT form of docs/eagle3.md §4 at step 0 against the independent
 * plain causal formulation, and the visibility pattern of docs/eagle3.md §8.
 */
import { causalAttentionRef, tttAttentionBackwardRef, tttAttentionRef, type TttDims } from '../../src/reference/attention.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** Tiny GQA shape: 2 query heads per kv head, odd head dim. */
const BASE = { batch: 2, seq: 5, heads: 4, kvHeads: 2, headDim: 3 };

/** Row 0 unpadded; row 1 has a padded first position (so its row 0 sees no key at step 0) and right padding. */
const MASK = [1, 1, 1, 1, 1, 0, 1, 1, 0, 0];

function randomProblem(seed: number, d: TttDims) {
  const rng = new Rng(seed);
  const nq = d.batch * d.seq * d.heads * d.headDim;
  const nkv = d.batch * d.seq * d.kvHeads * d.headDim;
  const q = Float64Array.from(rng.floats(nq, 1.5));
  const ks = Array.from({ length: d.step + 1 }, () => Float64Array.from(rng.floats(nkv, 1.5)));
  const vs = Array.from({ length: d.step + 1 }, () => Float64Array.from(rng.floats(nkv)));
  const w = Float64Array.from(rng.floats(nq));
  return { q, ks, vs, w };
}

export default defineSuite('reference/attention', (t) => {
  for (const step of [0, 1, 2]) {
    t.test(`TTT backward at step ${step} matches finite differences (GQA, padding)`, ({ note }) => {
      const d: TttDims = { ...BASE, step };
      const { q, ks, vs, w } = randomProblem(100 + step, d);
      // Loss = Σ o ⊙ w, so dO = w.
      const loss = () => {
        const { o } = tttAttentionRef(q, ks, vs, MASK, d);
        let s = 0;
        for (let i = 0; i < o.length; i++) s += o[i] * w[i];
        return s;
      };
      const grads = tttAttentionBackwardRef(q, ks, vs, MASK, w, d);
      const h = 1e-5;
      const numeric = (x: Float64Array): Float64Array => {
        const g = new Float64Array(x.length);
        for (let i = 0; i < x.length; i++) {
          const x0 = x[i];
          x[i] = x0 + h;
          const up = loss();
          x[i] = x0 - h;
          const down = loss();
          x[i] = x0;
          g[i] = (up - down) / (2 * h);
        }
        return g;
      };
      let worst = assertRelClose(grads.dq, numeric(q), 1e-6, 'dq');
      for (let j = 0; j <= step; j++) {
        worst = Math.max(worst, assertRelClose(grads.dk[j], numeric(ks[j]), 1e-6, `dK_${j}`));
        worst = Math.max(worst, assertRelClose(grads.dv[j], numeric(vs[j]), 1e-6, `dV_${j}`));
      }
      note('worstRelErr', worst);
    });
  }

  t.test('step 0 of the literal TTT form equals plain causal attention with padding', ({ note }) => {
    const d: TttDims = { ...BASE, step: 0 };
    const { q, ks, vs } = randomProblem(7, d);
    const ttt = tttAttentionRef(q, ks, vs, MASK, d);
    const plain = causalAttentionRef(q, ks[0], vs[0], MASK, d);
    const e1 = assertRelClose(ttt.o, plain.o, 1e-12, 'o');
    const e2 = assertRelClose(ttt.lse, plain.lse, 1e-12, 'lse');
    note('worstRelErr', Math.max(e1, e2));
    // The fully masked row (b 1, t 0) is zero in both, every head.
    for (let h = 0; h < d.heads; h++) {
      for (let e = 0; e < d.headDim; e++) assert(ttt.o[((1 * d.seq + 0) * d.heads + h) * d.headDim + e] === 0, 'empty row outputs 0');
    }
  });

  t.test('visibility follows the docs/eagle3.md §8 table (S 4, step 2)', () => {
    // One head, head dim 1, K = 0 everywhere: every allowed score is 0, so the probabilities are
    // uniform over exactly the attended keys; V marks each key by a distinct power of two.
    const d: TttDims = { batch: 1, seq: 4, heads: 1, kvHeads: 1, headDim: 1, step: 2 };
    const zeros = new Float64Array(4);
    const vs = [0, 1, 2].map((j) => Float64Array.from([0, 1, 2, 3], (u) => 2 ** (4 * j + u)));
    const { o } = tttAttentionRef(new Float64Array(4).fill(1), [zeros, zeros, zeros], vs, [1, 1, 1, 1], d);
    for (let t0 = 0; t0 < 4; t0++) {
      // Row t attends to step-0 keys 0..t and the step-1/step-2 keys of row t: t + 3 keys.
      let bits = 0;
      for (let u = 0; u <= t0; u++) bits += 2 ** u;
      bits += 2 ** (4 + t0) + 2 ** (8 + t0);
      const want = bits / (t0 + 3);
      assert(Math.abs(o[t0] - want) < 1e-9 * want, `row ${t0}: got ${o[t0]}, want ${want}`);
    }
  });
});
