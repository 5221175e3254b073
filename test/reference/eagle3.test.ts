/**
 * The float64 EAGLE3 training-step reference (src/reference/eagle3.ts) against SpecForge itself
 * (fixtures/eagle3, both variants): per-step draft logits and hidden outputs, losses, metrics and
 * every parameter gradient. Plus central finite differences of the total loss on a tiny random
 * config with padding, GQA, several TTT steps and a partial draft vocabulary, which checks the
 * hand-written backward (recurrent hidden and K/V-cache paths included) independently of SpecForge.
 */
import type { Eagle3Config } from '../../src/config/eagle3-config.ts';
import { EMBED_NAME, eagle3ParameterShapes } from '../../src/config/eagle3-config.ts';
import { eagle3StepReference, type Eagle3RefInputs } from '../../src/reference/eagle3.ts';
import { Rng } from '../../src/util/random.ts';
import { assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { loadEagle3Fixture, VARIANTS } from '../model/eagle3-fixture.ts';
import { numericGradient } from './finite-difference.ts';

/** A tiny draft: 2 query heads sharing 1 kv head, D < V, Ht ≠ H. */
const TINY: Eagle3Config = {
  hiddenSize: 8,
  intermediateSize: 12,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 4,
  vocabSize: 20,
  draftVocabSize: 8,
  targetHiddenSize: 6,
  rmsNormEps: 1e-6,
  ropeTheta: 10000,
  maxPositionEmbeddings: 64,
};

function tinyProblem(seed: number) {
  const rng = new Rng(seed);
  const c = TINY;
  const B = 2;
  const S = 5;
  const params: Record<string, Float64Array> = {};
  params[EMBED_NAME] = Float64Array.from(rng.floats(c.vocabSize * c.hiddenSize, 1));
  for (const [name, shape] of eagle3ParameterShapes(c)) {
    const n = shape.reduce((a, b) => a * b, 1);
    // Norm weights around 1, matrices large enough that every path carries a visible gradient.
    params[name] =
      shape.length === 1 ? Float64Array.from({ length: n }, () => 1 + rng.uniform(-0.3, 0.3)) : Float64Array.from(rng.floats(n, 0.6));
  }
  // Draft vocabulary: target ids 1, 3, 4, 7, 9, 12, 15, 18.
  const used = [1, 3, 4, 7, 9, 12, 15, 18];
  const t2d = new Int32Array(c.vocabSize);
  for (const u of used) t2d[u] = 1;
  const d2t = Int32Array.from(used, (u, i) => u - i);
  const target = Float64Array.from(rng.floats(B * S * c.vocabSize, 3));
  // Make most rows' argmax a draft token so the loss is supervised at several positions.
  for (let r = 0; r < B * S; r++) if (r % 4 !== 3) target[r * c.vocabSize + used[r % used.length]] += 6;
  const inputs: Eagle3RefInputs = {
    batch: B,
    seqLen: S,
    tttLength: 3,
    inputIds: Int32Array.from({ length: B * S }, () => rng.int(0, c.vocabSize)),
    // Row 1 is right-padded by two positions.
    attentionMask: Int32Array.from([1, 1, 1, 1, 1, 1, 1, 1, 0, 0]),
    lossMask: Int32Array.from([0, 1, 1, 1, 1, 1, 1, 1, 0, 0]),
    hiddenStates: Float64Array.from(rng.floats(B * S * 3 * c.targetHiddenSize, 1)),
    target,
    t2d,
    d2t,
  };
  return { params, inputs };
}

export default defineSuite('reference/eagle3', (t) => {
  for (const { name, prefix } of VARIANTS) {
    t.test(`SpecForge fixture (${name}): step logits/hidden, losses, metrics, every gradient`, async ({ fixture, note }) => {
      const fx = await loadEagle3Fixture(fixture, prefix);
      const ref = eagle3StepReference(fx.config, fx.params, fx.inputs);
      const L = fx.inputs.tttLength;
      let worstFwd = 0;
      for (let k = 0; k < L; k++) {
        worstFwd = Math.max(worstFwd, assertRelClose(ref.steps[k].logits, fx.expected(`step_logits.${k}`), 1e-5, `step_logits.${k}`));
        worstFwd = Math.max(worstFwd, assertRelClose(ref.steps[k].hidden, fx.expected(`step_hidden.${k}`), 1e-5, `step_hidden.${k}`));
      }
      const worstLoss = Math.max(
        assertRelClose(
          ref.steps.map((s) => s.ploss),
          fx.expected('plosses'),
          1e-5,
          'plosses',
        ),
        assertRelClose(
          ref.steps.map((s) => s.acc),
          fx.expected('acces'),
          1e-5,
          'acces',
        ),
        assertRelClose(
          ref.steps.map((s) => s.acceptanceRate),
          fx.expected('acceptance_rates'),
          1e-5,
          'acceptance_rates',
        ),
        assertRelClose([ref.totalLoss], fx.expected('total_loss'), 1e-5, 'total_loss'),
      );
      let worstGrad = 0;
      let worstName = '';
      for (const p of fx.trainable) {
        const e = assertRelClose(ref.grads[p], fx.expected(`grad.${p}`), 1e-4, `grad.${p}`);
        if (e > worstGrad) [worstGrad, worstName] = [e, p];
      }
      note('forwardRelErr', worstFwd.toExponential(2));
      note('lossMetricRelErr', worstLoss.toExponential(2));
      note('gradRelErr', `${worstGrad.toExponential(2)} (${worstName})`);
    });
  }

  t.test('backward through the TTT unroll matches finite differences (tiny random config)', ({ note }) => {
    const { params, inputs } = tinyProblem(7);
    const lossScale = 0.5;
    const ref = eagle3StepReference(TINY, params, inputs, { lossScale });
    let worst = 0;
    for (const [name] of eagle3ParameterShapes(TINY)) {
      const x = params[name];
      const numeric = numericGradient(
        (v) => {
          const saved = params[name];
          params[name] = v;
          const loss = eagle3StepReference(TINY, params, inputs, { withGrad: false }).totalLoss;
          params[name] = saved;
          return lossScale * loss;
        },
        Float64Array.from(x),
        1e-5,
      );
      worst = Math.max(worst, assertRelClose(ref.grads[name], numeric, 1e-6, `d total_loss / d ${name}`));
    }
    note('fdRelErr', worst.toExponential(2));
  });
});
