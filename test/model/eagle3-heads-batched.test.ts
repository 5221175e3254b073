/**
 * Every TTT step's head at once (src/model/eagle3/step-heads-batched.ts) against one head per step
 * (`batchHeads: false`) on the same problem: the losses, the metric sums, each step's logits and
 * every gradient but lm_head's are the same bits (each row goes through the same kernels); lm_head's
 * gradient sums the same terms in one product instead of step by step, within 1e-6 relative. With
 * activation recompute, and against float64 (src/reference/eagle3.ts). `batchedHeadsFit` says where
 * the heads batch: more than one step, small logits, rows on a binding boundary.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { Eagle3DraftModel } from '../../src/model/eagle3/model.ts';
import { BATCHED_HEADS_MAX_BYTES, batchedHeadRows, batchedHeadsFit } from '../../src/model/eagle3/step-heads-batched.ts';
import { AdamWBackend } from '../../src/optim/adamw-backend.ts';
import { eagle3ParameterShapes, type Eagle3Config } from '../../src/config/eagle3-config.ts';
import { eagle3StepReference } from '../../src/reference/eagle3.ts';
import { assert, assertEqual, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { FIXTURE_OPTIMIZER, releaseInputs } from './eagle3-fixture.ts';
import { randomEagle3Problem, readTrainedStep, SPLITTABLE_DRAFT, uploadRandomInputs, type TrainedStep } from './eagle3-random.ts';

const CONFIG: Eagle3Config = SPLITTABLE_DRAFT;
const LAYOUT = { seqLen: 24, lengths: [24, 19], usedOffset: 1, lossStart: 1 };
const ROWS = 48;
const MIB = 1024 * 1024;

interface Run extends TrainedStep {
  /** Each step's logits, where captured. */
  logits: Float32Array[];
  /** Dispatches the forward and backward encoded. */
  dispatches: number;
}

async function trainStep(gpu: Gpu, seed: number, batchHeads: boolean, recompute: boolean, capture = true): Promise<Run> {
  const { values, inputs: x } = randomEagle3Problem(CONFIG, seed, LAYOUT);
  const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
  const model = new Eagle3DraftModel(gpu, backend, CONFIG, values, { t2d: x.t2d, d2t: x.d2t });
  const inputs = uploadRandomInputs(gpu, CONFIG, x);
  const before = gpu.batcher.stats.dispatches;
  const out = await model.trainStep(inputs, { tttLength: x.tttLength, lossScale: 0.5, capture, recompute, batchHeads });
  const dispatches = gpu.batcher.stats.dispatches - before;
  const logits = capture ? await Promise.all(out.stepLogits!) : [];
  const run = { ...(await readTrainedStep(gpu, backend, CONFIG, out)), logits, dispatches };
  releaseInputs(gpu, inputs);
  model.destroy();
  backend.destroy();
  assertEqual(gpu.pool.stats().liveBuffers, 1, `batchHeads ${batchHeads}: every GPU buffer released but the loss placeholder`);
  return run;
}

export default defineSuite('model/eagle3-heads-batched', (t) => {
  t.test(
    'every step head at once gives one head per step: the same losses, metrics, logits and gradients (lm_head within 1e-6)',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      try {
        const seed = 47;
        const { values, inputs: x } = randomEagle3Problem(CONFIG, seed, LAYOUT);
        const D = CONFIG.draftVocabSize;
        // The problem is one the training step batches, so the comparison exercises both paths.
        assert(batchedHeadsFit(ROWS, x.tttLength, D, CONFIG.hiddenSize, gpu.maxBindingBytes), 'the test problem batches its heads');
        const names = eagle3ParameterShapes(CONFIG).map(([n]) => n);
        const ref = eagle3StepReference(CONFIG, values, x, { lossScale: 0.5 });
        for (const [recompute, capture] of [
          [false, true],
          [true, true],
          [false, false],
        ] as const) {
          const perStep = await trainStep(gpu, seed, false, recompute, capture);
          const batched = await trainStep(gpu, seed, true, recompute, capture);
          const what = `${recompute ? 'recompute' : 'kept bodies'}${capture ? ', logits captured' : ''}`;
          // The batched path ran: one final norm, two products (three where lm_head's gradients take two
          // dispatches), one metrics and one loss dispatch for L heads instead of L of each.
          const saved = perStep.dispatches - batched.dispatches;
          const least = 5 * (x.tttLength - 1);
          assert(saved >= least, `${what}: ${saved} dispatches saved, at least ${least} expected`);
          note(`${what}: dispatches`, `${perStep.dispatches} → ${batched.dispatches}`);
          assert(sameBits(batched.losses, perStep.losses), `${what}: losses are the same bits`);
          assert(sameBits(batched.metricSums, perStep.metricSums), `${what}: metric sums are the same bits`);
          assertEqual(batched.logits.length, capture ? x.tttLength : 0, `${what}: each step's logits read back`);
          batched.logits.forEach((l, k) => assert(sameBits(l, perStep.logits[k]), `${what}: step ${k}'s logits are the same bits`));
          names.forEach((n, i) => {
            if (n === 'lm_head.weight') assertRelClose(batched.grads[i], perStep.grads[i], 1e-6, `${what}: grad ${n}`);
            else assert(sameBits(batched.grads[i], perStep.grads[i]), `${what}: grad ${n} is the same bits`);
          });
          // Against float64: the batched step's losses and gradients.
          assertRelClose(batched.losses, [...ref.steps.map((s) => s.ploss), ref.totalLoss], 1e-5, `${what}: losses against float64`);
          names.forEach((n, i) => assertRelClose(batched.grads[i], ref.grads[n], 1e-4, `${what}: grad ${n} against float64`));
          const lm = names.indexOf('lm_head.weight');
          note(`${what}: lm_head grad`, sameBits(batched.grads[lm], perStep.grads[lm]) ? 'the same bits' : 'within 1e-6');
        }
      } finally {
        gpu.destroy();
      }
    },
  );

  t.test('batchedHeadsFit: several steps, logits within the cap and a binding, every step on a binding boundary', () => {
    const big = 128 * MIB;
    assert(batchedHeadsFit(80, 4, 96, 64, big), 'the fixture step (2 × 40, TTT 4) batches');
    assert(!batchedHeadsFit(224, 4, 2048, 128, big), 'the lab step (4 × 56, TTT 4: 7.3 MB of logits) keeps one head per step');
    assert(!batchedHeadsFit(80, 1, 96, 64, big), 'one step has nothing to batch');
    assert(!batchedHeadsFit(128, 7, 8000, 1024, big), 'the mid step (logits 28 MB) keeps one head per step');
    assert(!batchedHeadsFit(64, 4, BATCHED_HEADS_MAX_BYTES / (64 * 4 * 4) + 64, 64, big), 'logits over the cap');
    assert(!batchedHeadsFit(80, 4, 96, 64, 80 * 4 * 96 * 4 - 256), 'logits over one binding');
    assert(!batchedHeadsFit(81, 4, 96, 64, big), "a step's rows off a 256-byte boundary");
    assert(!batchedHeadsFit(80, 4, 96, 62, big), "a step's f rows off a 256-byte boundary");
    // The most rows of a step that batch its heads, for the memory plan: a shorter batch of the lab's may.
    assertEqual(batchedHeadRows(80, 4, 96, 64, big), 80, 'the fixture: all its rows');
    assertEqual(batchedHeadRows(224, 4, 2048, 128, big), 128, 'the lab: 128 rows (4 MiB of logits) batch, 224 do not');
    assertEqual(batchedHeadRows(81, 4, 96, 64, big), 80, 'the rows below an unaligned count');
    assertEqual(batchedHeadRows(128, 1, 96, 64, big), 0, 'one step: none');
  });
});
