/**
 * SpecForge's tracker keys (src/training/evaluation/metric-keys.ts): the exact train/* and eval/* key sets and
 * values, SpecForge's train reduction of summed strategy metrics (ratios of sums, acceptance rates
 * weighted by n = B·S), and on the fixture batch the train record of one strategy step carries
 * SpecForge's plosses, accuracies, acceptance rates and total loss.
 */
import { makeTrainBatch } from '../../../src/contracts/index.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { Eagle3DraftModel } from '../../../src/model/eagle3/model.ts';
import { AdamWBackend } from '../../../src/optim/adamw-backend.ts';
import { reduceTrainMetrics, simulatedAcceptLength, specForgeMetrics, weightedLoss } from '../../../src/training/evaluation/metric-keys.ts';
import { eagle3StepMetrics, Eagle3TrainStrategy } from '../../../src/training/strategies/eagle3.ts';
import { assertDeepEqual, assertEqual, assertRelClose, assertThrows } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { FIXTURE_OPTIMIZER, loadEagle3Fixture, releaseInputs, uploadFixtureInputs } from '../../model/eagle3-fixture.ts';

const VALUES = {
  loss: 2.5,
  plosses: [1, 1.5, 0.5],
  accs: [0.5, 0.25, 0.125],
  simulatedAcceptance: 0.5 + 0.125 + 0.015625,
  acc: 0.3,
  acceptanceRates: [0.5, 0.25, 0.75],
  lr: 1e-4,
  gradNorm: 0.75,
};

export default defineSuite('training/evaluation/metric-keys', (t) => {
  t.test("train/* keys: SpecForge's names and order, simulated_acc_len as the one extension", () => {
    assertDeepEqual(
      specForgeMetrics('train', VALUES),
      {
        'train/loss': 2.5,
        'train/acc': 0.3,
        'train/acc_0': 0.5,
        'train/acc_1': 0.25,
        'train/acc_2': 0.125,
        'train/ploss_0': 1,
        'train/ploss_1': 1.5,
        'train/ploss_2': 0.5,
        'train/acceptance_rate_0': 0.5,
        'train/acceptance_rate_1': 0.25,
        'train/acceptance_rate_2': 0.75,
        'train/acceptance_rate': 0.5,
        'train/lr': 1e-4,
        'train/grad_norm': 0.75,
        'train/simulated_acc_len': 0.640625,
      },
      'train record',
    );
    const bare = specForgeMetrics('train', { loss: 1, plosses: [1], accs: [0.5], simulatedAcceptance: 0.5, gradNorm: Number.NaN });
    assertEqual(
      Object.keys(bare).join(),
      'train/loss,train/acc_0,train/ploss_0,train/grad_norm,train/simulated_acc_len',
      'optional keys only when given',
    );
    assertEqual(Number.isNaN(bare['train/grad_norm']), true, "a skipped step's NaN grad norm is kept");
  });

  t.test("eval/* keys: Evaluator.run's names, per_position_acc expanded as the trackers get it", () => {
    assertDeepEqual(
      specForgeMetrics('eval', VALUES),
      {
        'eval/avg_loss': 2.5,
        'eval/avg_acc': 0.5,
        'eval/per_position_acc/0': 0.5,
        'eval/per_position_acc/1': 0.25,
        'eval/per_position_acc/2': 0.125,
        'eval/simulated_acc_len': 0.640625,
        'eval/acceptance_rate_0': 0.5,
        'eval/acceptance_rate_1': 0.25,
        'eval/acceptance_rate_2': 0.75,
        'eval/ploss_0': 1,
        'eval/ploss_1': 1.5,
        'eval/ploss_2': 0.5,
      },
      'eval record (no lr, grad_norm or pooled acc: SpecForge logs none for eval)',
    );
    assertThrows(() => specForgeMetrics('eval', { ...VALUES, plosses: [1] }), /1 plosses for 3 accuracies/, 'length mismatch');
    assertThrows(
      () => specForgeMetrics('train', { ...VALUES, acceptanceRates: [1, 2] }),
      /2 acceptance rates for 3 accuracies/,
      'rate length mismatch',
    );
  });

  t.test("reduceTrainMetrics: ratios of the step's summed sums, acceptance weighted by n, loss = Σ 0.8ᵏ ploss_k", () => {
    // Two micro-batches (n = 8 and n = 24), their strategy records added key by key as TrainerController does.
    const a = eagle3StepMetrics([2, 3, 2 + 0.8 * 3], [6, 8, 3, 4, 1, 6, 1, 2], 8, 2);
    const b = eagle3StepMetrics([1, 4, 1 + 0.8 * 4], [2, 16, 5, 10, 2, 14, 6, 12], 24, 2);
    const summed: Record<string, number> = {};
    for (const m of [a, b]) for (const [k, v] of Object.entries(m)) summed[k] = (summed[k] ?? 0) + v;
    const r = reduceTrainMetrics(summed, 2);
    assertRelClose(r.accs, [8 / 24, 3 / 20], 1e-15, 'acc_k = Σcorrect / Σdenom');
    assertRelClose([r.acc!], [11 / 44], 1e-15, 'acc pooled over positions');
    assertRelClose(r.plosses, [(2 * 8 + 1 * 24) / 32, (3 * 8 + 4 * 24) / 32], 1e-15, 'ploss_k = Σ ploss·n / Σ n');
    assertRelClose([r.loss], [weightedLoss(r.plosses)], 1e-15, 'loss');
    assertRelClose(
      r.acceptanceRates!,
      [((3 / 4) * 8 + (5 / 10) * 24) / 32, ((1 / 2) * 8 + (6 / 12) * 24) / 32],
      1e-15,
      'acceptance_rate_k: per-batch rates weighted by n',
    );
    assertRelClose([r.simulatedAcceptance], [simulatedAcceptLength(r.accs)], 1e-15, 'simulated acceptance length');
    const { accept_rate_num_0: _a, accept_rate_num_1: _b, ...older } = summed;
    assertEqual(reduceTrainMetrics(older, 2).acceptanceRates, undefined, 'no acceptance rates without accept_rate_num_k');
    assertThrows(() => reduceTrainMetrics(summed, 3), /metric "correct_2" is missing/, 'TTT length beyond the record');
    assertThrows(() => reduceTrainMetrics(summed, 0), /tttLength must be a positive integer/, 'TTT length 0');
    assertEqual(simulatedAcceptLength([]), 0, 'no positions');
  });

  t.test("the train record of one strategy step on the fixture batch carries SpecForge's numbers", async ({ gpu: ctx, fixture }) => {
    const gpu = new Gpu(ctx);
    const fx = await loadEagle3Fixture(fixture, 'strong.');
    const L = fx.inputs.tttLength;
    const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
    const model = new Eagle3DraftModel(gpu, backend, fx.config, fx.params, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
    const x = uploadFixtureInputs(gpu, fx);
    const batch = makeTrainBatch({
      sampleIds: ['s0', 's1'],
      strategy: 'eagle3',
      tensors: {
        input_ids: x.inputIds,
        attention_mask: x.attentionMask,
        loss_mask: x.lossMask,
        hidden_state: x.hiddenStates,
        target: x.target,
      },
      metadata: { targetRepr: 'logits', tttLength: L },
    });
    const out = await new Eagle3TrainStrategy(model, { tttLength: L }).forwardBackward(batch, 1);
    const r = reduceTrainMetrics(await out.metrics, L);
    assertRelClose(r.plosses, fx.expected('plosses'), 1e-5, 'plosses');
    assertRelClose(r.accs, fx.expected('acces'), 1e-5, 'accuracies');
    assertRelClose(r.acceptanceRates!, fx.expected('acceptance_rates'), 1e-5, 'acceptance rates');
    assertRelClose([r.loss], fx.expected('total_loss'), 1e-5, 'total loss');
    const record = specForgeMetrics('train', r);
    assertRelClose(
      Array.from({ length: L }, (_, k) => record[`train/acc_${k}`]),
      fx.expected('acces'),
      1e-5,
      'train/acc_k',
    );
    releaseInputs(gpu, x);
    model.destroy();
    backend.destroy();
    gpu.destroy();
  });
});
