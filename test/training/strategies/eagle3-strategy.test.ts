/**
 * Eagle3TrainStrategy through TrainerCore on the SpecForge fixture batch: with the backend configured
 * like the fixture's optimizer, one trainer step lands on after_step.* (both variants), the reported
 * loss, metric sums and grad norm match; with accumulation 2 over the same batch twice (each half
 * scaled by 1/2) the step is the same. A batch carrying the target hidden state, a missing feature or
 * a TTT-length mismatch is refused.
 */
import { makeTrainBatch, type TrainBatch } from '../../../src/contracts/index.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import type { Tensor } from '../../../src/gpu/tensor.ts';
import { Eagle3DraftModel } from '../../../src/model/eagle3/model.ts';
import { AdamWBackend } from '../../../src/optim/adamw-backend.ts';
import { Eagle3TrainStrategy } from '../../../src/training/strategies/eagle3.ts';
import { TrainerCore } from '../../../src/training/loop/trainer-core.ts';
import { assertEqual, assertRejects, assertRelClose } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import {
  FIXTURE_OPTIMIZER,
  loadEagle3Fixture,
  releaseInputs,
  uploadFixtureInputs,
  VARIANTS,
  type Eagle3Fixture,
} from '../../model/eagle3-fixture.ts';

function fixtureBatch(
  gpu: Gpu,
  fx: Eagle3Fixture,
  metadata: Record<string, unknown> = { targetRepr: 'logits', tttLength: 4 },
): TrainBatch<Tensor> {
  const x = uploadFixtureInputs(gpu, fx);
  return makeTrainBatch({
    sampleIds: ['s0', 's1'],
    strategy: 'eagle3',
    tensors: {
      input_ids: x.inputIds,
      attention_mask: x.attentionMask,
      loss_mask: x.lossMask,
      hidden_state: x.hiddenStates,
      target: x.target,
    },
    metadata,
  });
}

function releaseBatch(gpu: Gpu, b: TrainBatch<Tensor>): void {
  const t = b.tensors;
  releaseInputs(gpu, {
    inputIds: t.input_ids,
    attentionMask: t.attention_mask,
    lossMask: t.loss_mask,
    hiddenStates: t.hidden_state,
    target: t.target,
  });
}

export default defineSuite('training/strategies/eagle3-strategy', (t) => {
  for (const { name, prefix } of VARIANTS) {
    for (const accumulation of [1, 2]) {
      t.test(
        `TrainerCore step on the fixture batch (${name}, accumulation ${accumulation}) equals after_step.*`,
        async ({ gpu: ctx, fixture, note }) => {
          const gpu = new Gpu(ctx);
          const fx = await loadEagle3Fixture(fixture, prefix);
          const L = fx.inputs.tttLength;
          const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
          const model = new Eagle3DraftModel(gpu, backend, fx.config, fx.params, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
          const core = new TrainerCore(new Eagle3TrainStrategy(model, { tttLength: L }), backend, accumulation);
          const batches = Array.from({ length: accumulation }, () => fixtureBatch(gpu, fx));
          const results = [];
          for (const b of batches) results.push(await core.trainStep(b));
          assertEqual(
            results.map((r) => r.optimizerStepped).join(),
            [...Array(accumulation - 1).fill(false), true].join(),
            'steps only at the boundary',
          );
          const last = results[accumulation - 1];
          const after = fx.trainable.map((p) => gpu.readLater(backend.param(p).value));
          await gpu.sync();
          let worst = 0;
          let worstName = '';
          for (let i = 0; i < fx.trainable.length; i++) {
            const e = assertRelClose(await after[i], fx.expected(`after_step.${fx.trainable[i]}`), 1e-5, `after_step.${fx.trainable[i]}`);
            if (e > worst) [worst, worstName] = [e, fx.trainable[i]];
          }
          assertRelClose([await last.gradNorm!], fx.expected('grad_norm_preclip'), 1e-5, 'grad norm');
          assertRelClose([await last.loss], fx.expected('total_loss'), 1e-5, 'loss');
          const m = await last.metrics;
          const acc = Array.from({ length: L }, (_, k) => m[`correct_${k}`] / Math.max(m[`denom_${k}`], 1e-6));
          const rate = Array.from({ length: L }, (_, k) => m[`accept_sum_${k}`] / Math.max(m[`accept_count_${k}`], 1e-8));
          const ploss = Array.from({ length: L }, (_, k) => m[`ploss_num_${k}`] / m[`ploss_den_${k}`]);
          assertRelClose(acc, fx.expected('acces'), 1e-5, 'acc from sums');
          assertRelClose(rate, fx.expected('acceptance_rates'), 1e-5, 'acceptance rate from sums');
          assertRelClose(ploss, fx.expected('plosses'), 1e-5, 'ploss from sums');
          note('afterStepRelErr', `${worst.toExponential(2)} (${worstName})`);
          for (const b of batches) releaseBatch(gpu, b);
          model.destroy();
          backend.destroy();
          gpu.destroy();
        },
        { timeoutMs: 300_000 },
      );
    }
  }

  t.test('refuses hidden-state targets, missing features and a TTT-length mismatch', async ({ gpu: ctx, fixture }) => {
    const gpu = new Gpu(ctx);
    const fx = await loadEagle3Fixture(fixture, '');
    const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
    const model = new Eagle3DraftModel(gpu, backend, fx.config, fx.params, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
    const strategy = new Eagle3TrainStrategy(model, { tttLength: 4 });
    const core = new TrainerCore(strategy, backend, 1);
    const hiddenRepr = fixtureBatch(gpu, fx, { targetRepr: 'hidden_state' });
    await assertRejects(() => core.trainStep(hiddenRepr), /needs full-vocab target logits/, 'hidden_state target');
    const wrongTtt = fixtureBatch(gpu, fx, { targetRepr: 'logits', tttLength: 7 });
    await assertRejects(() => core.trainStep(wrongTtt), /TTT length 7/, 'ttt mismatch');
    const missing = fixtureBatch(gpu, fx);
    const target = missing.tensors.target;
    delete missing.tensors.target;
    await assertRejects(() => core.trainStep(missing), /lacks feature "target"/, 'missing target');
    assertEqual(core.microStep, 0, 'no micro-step counted for refused batches');
    missing.tensors.target = target;
    for (const b of [hiddenRepr, wrongTtt, missing]) releaseBatch(gpu, b);
    model.destroy();
    backend.destroy();
    gpu.destroy();
  });
});
