/**
 * Evaluation while training (src/training/evaluation/held-out-eval.ts, the gradient-free mode of src/model/eagle3/forward.ts):
 *  - Eagle3TrainStrategy.evaluate gives forwardBackward's loss and metric sums bit for bit on the
 *    SpecForge fixture batch (both variants), writes no gradient or weight and frees what it allocates;
 *  - reduceEvalMetrics forms SpecForge's Evaluator ratios from float64 sums (a constructed case where
 *    sums-before-ratios and the mean of per-batch ratios are far apart; counts past 2²⁴ stay exact);
 *  - the fixture prompts captured once by the llama-tiny target (captureHeldOutBatches) and run through
 *    HeldOutEvaluator reproduce SpecForge's numbers for the fixture batch; split into two batches of
 *    lengths 40 and 33 the result is the sums-before-ratios answer, its accuracies equal the unsplit
 *    ones, and it differs from the mean of per-batch ratios; destroy releases the batches.
 */
import { makeTrainBatch, type TrainBatch } from '../../../src/contracts/index.ts';
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import type { Tensor } from '../../../src/gpu/tensor.ts';
import { eagle3CaptureConfig, TargetFeatureSource } from '../../../src/inference/target-feature-source.ts';
import { Eagle3DraftModel } from '../../../src/model/eagle3/model.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import { AdamWBackend } from '../../../src/optim/adamw-backend.ts';
import { SafetensorsFile } from '../../../src/formats/safetensors.ts';
import {
  addEvalBatch,
  captureHeldOutBatches,
  emptyEvalSums,
  HeldOutEvaluator,
  reduceEvalMetrics,
  type HeldOutSequence,
} from '../../../src/training/evaluation/held-out-eval.ts';
import { simulatedAcceptLength } from '../../../src/training/evaluation/metric-keys.ts';
import { Eagle3TrainStrategy } from '../../../src/training/strategies/eagle3.ts';
import type { DraftTrainStrategy } from '../../../src/training/loop/strategy.ts';
import { tempStore } from '../../data/temp-store.ts';
import { assert, assertEqual, assertRejects, assertRelClose, assertThrows } from '../../harness/assert.ts';
import { defineSuite, type TestContext } from '../../harness/suite.ts';
import {
  FIXTURE_OPTIMIZER,
  loadEagle3Fixture,
  releaseInputs,
  uploadFixtureInputs,
  VARIANTS,
  type Eagle3Fixture,
} from '../../model/eagle3-fixture.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

function fixtureBatch(gpu: Gpu, fx: Eagle3Fixture): TrainBatch<Tensor> {
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
    metadata: { targetRepr: 'logits', tttLength: fx.inputs.tttLength },
  });
}

function draftFor(gpu: Gpu, fx: Eagle3Fixture): { backend: AdamWBackend; model: Eagle3DraftModel; strategy: Eagle3TrainStrategy } {
  const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
  const model = new Eagle3DraftModel(gpu, backend, fx.config, fx.params, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
  return { backend, model, strategy: new Eagle3TrainStrategy(model, { tttLength: fx.inputs.tttLength, gpu }) };
}

/** Every trainable weight and gradient, read back now. */
async function snapshot(gpu: Gpu, backend: AdamWBackend, names: readonly string[]): Promise<Float32Array[]> {
  const reads = names.flatMap((n) => [gpu.readLater(backend.param(n).value), gpu.readLater(backend.param(n).grad)]);
  await gpu.sync();
  return (await Promise.all(reads)) as Float32Array[];
}

function sameBits(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  const fa = Float32Array.from(a);
  const fb = Float32Array.from(b);
  const ua = new Uint32Array(fa.buffer);
  const ub = new Uint32Array(fb.buffer);
  return ua.every((x, i) => x === ub[i]);
}

/** The fixture's two prompts as held-out sequences (raw ids and loss mask, unpadded). */
function fixtureSequences(ref: SafetensorsFile): HeldOutSequence[] {
  const [B, S] = ref.shape('raw.input_ids');
  const ids = ref.i32('raw.input_ids');
  const mask = ref.i32('attention_mask');
  const lossMask = ref.i32('raw.loss_mask');
  return Array.from({ length: B }, (_, b) => {
    let len = 0;
    while (len < S && mask[b * S + len]) len++;
    return { inputIds: [...ids.subarray(b * S, b * S + len)], lossMask: [...lossMask.subarray(b * S, b * S + len)] };
  });
}

async function loadTarget(ctx: TestContext, gpu: Gpu): Promise<TargetModel> {
  const tmp = tempStore(ctx.platform, 'held-out-eval');
  try {
    await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'm');
    return TargetModel.create(gpu, await loadHfCheckpoint(tmp.files, 'm'));
  } finally {
    await tmp.cleanup();
  }
}

const bufferCount = (batches: readonly TrainBatch<Tensor>[]) =>
  batches.reduce((n, b) => n + Object.values(b.tensors).reduce((m, t) => m + t.parts.length, 0), 0);

export default defineSuite('training/evaluation/held-out-eval', (t) => {
  for (const { name, prefix } of VARIANTS) {
    t.test(
      `evaluate equals forwardBackward's loss and metrics bit for bit and writes no gradient or weight (${name})`,
      async ({ gpu: ctx, fixture, note }) => {
        const gpu = new Gpu(ctx);
        const fx = await loadEagle3Fixture(fixture, prefix);
        const L = fx.inputs.tttLength;
        const { backend, model, strategy } = draftFor(gpu, fx);
        const batch = fixtureBatch(gpu, fx);
        // A first step leaves non-zero gradients, so an evaluate that wrote any would show.
        await (
          await strategy.forwardBackward(batch, 1)
        ).metrics;
        const before = await snapshot(gpu, backend, fx.trainable);
        const live = gpu.pool.stats().liveBuffers;
        const ev = await strategy.evaluate(batch);
        assertEqual(gpu.pool.stats().liveBuffers, live, 'evaluate releases every tensor it allocates');
        const [evLoss, evMetrics] = await Promise.all([ev.loss, ev.metrics]);
        const after = await snapshot(gpu, backend, fx.trainable);
        before.forEach((b, i) => assert(sameBits(after[i], b), `${fx.trainable[i >> 1]} ${i % 2 ? 'grad' : 'value'} changed by evaluate`));

        const fb = await strategy.forwardBackward(batch, 1);
        const [fbLoss, fbMetrics] = await Promise.all([fb.loss, fb.metrics]);
        assert(sameBits([evLoss], [fbLoss]), `loss: evaluate ${evLoss}, forwardBackward ${fbLoss}`);
        assertEqual(Object.keys(evMetrics).sort().join(), Object.keys(fbMetrics).sort().join(), 'metric keys');
        for (const key of Object.keys(fbMetrics))
          assert(
            sameBits([evMetrics[key]], [fbMetrics[key]]) || evMetrics[key] === fbMetrics[key],
            `${key}: evaluate ${evMetrics[key]}, forwardBackward ${fbMetrics[key]}`,
          );
        const ks = Array.from({ length: L }, (_, k) => k);
        note('lossRelErrVsSpecForge', assertRelClose([evLoss], fx.expected('total_loss'), 1e-5, 'evaluate loss vs SpecForge'));
        assertRelClose(
          ks.map((k) => evMetrics[`ploss_${k}`]),
          fx.expected('plosses'),
          1e-5,
          'evaluate plosses vs SpecForge',
        );
        assertRelClose(
          ks.map((k) => evMetrics[`correct_${k}`] / evMetrics[`denom_${k}`]),
          fx.expected('acces'),
          1e-5,
          'evaluate accuracies vs SpecForge',
        );
        releaseInputs(gpu, {
          inputIds: batch.tensors.input_ids,
          attentionMask: batch.tensors.attention_mask,
          lossMask: batch.tensors.loss_mask,
          hiddenStates: batch.tensors.hidden_state,
          target: batch.tensors.target,
        });
        model.destroy();
        backend.destroy();
        gpu.destroy();
      },
      { timeoutMs: 300_000 },
    );
  }

  t.test('reduceEvalMetrics: ratios of float64 sums (not the mean of per-batch ratios), SpecForge clamps, empty → undefined', () => {
    // Two batches with L = 2: a small one (n = B·S = 10) that the drafter gets right, a large one (n = 1000) it does not.
    const batches = [
      { loss: 1 + 0.8 * 2, n: 10, correct: [9, 3], denom: [10, 9], ploss: [1, 2], acc: [4, 2], cnt: [5, 4] },
      { loss: 3 + 0.8 * 4, n: 1000, correct: [100, 10], denom: [1000, 100], ploss: [3, 4], acc: [300, 20], cnt: [600, 80] },
    ];
    const sums = emptyEvalSums(2);
    for (const b of batches) {
      const m: Record<string, number> = {};
      for (let k = 0; k < 2; k++) {
        Object.assign(m, {
          [`ploss_${k}`]: b.ploss[k],
          [`ploss_den_${k}`]: b.n,
          [`correct_${k}`]: b.correct[k],
          [`denom_${k}`]: b.denom[k],
          [`accept_sum_${k}`]: b.acc[k],
          [`accept_count_${k}`]: b.cnt[k],
        });
      }
      addEvalBatch(sums, b.loss, m);
    }
    const r = reduceEvalMetrics(sums)!;
    // The float64 formulas of Evaluator.run, written out (w_b = L · n_b).
    const w = batches.map((b) => 2 * b.n);
    const W = w[0] + w[1];
    const accs = [0, 1].map((k) => (batches[0].correct[k] + batches[1].correct[k]) / (batches[0].denom[k] + batches[1].denom[k]));
    assertRelClose(r.accs, accs, 1e-15, 'per-position accuracy = Σcorrect / Σdenom');
    assertRelClose([r.loss], [(batches[0].loss * w[0] + batches[1].loss * w[1]) / W], 1e-15, 'avg_loss token-weighted');
    assertRelClose(
      r.plosses,
      [0, 1].map((k) => (batches[0].ploss[k] * w[0] + batches[1].ploss[k] * w[1]) / W),
      1e-15,
      'ploss token-weighted',
    );
    assertRelClose([r.loss], [r.plosses[0] + 0.8 * r.plosses[1]], 1e-15, 'avg_loss = Σ 0.8ᵏ ploss_k');
    assertRelClose(
      r.acceptanceRates,
      [0, 1].map((k) => ((batches[0].acc[k] / batches[0].cnt[k]) * w[0] + (batches[1].acc[k] / batches[1].cnt[k]) * w[1]) / W),
      1e-15,
      'acceptance rate: per-batch rates weighted by w',
    );
    assertRelClose([r.simulatedAcceptance], [accs[0] + accs[0] * accs[1]], 1e-15, 'simulated_acc_len = a0 + a0·a1');
    assertEqual(r.batches, 2, 'batches');
    assertEqual(r.lossTokens, 1010, 'loss tokens at position 0');
    const meanOfRatios = [0, 1].map((k) => (batches[0].correct[k] / batches[0].denom[k] + batches[1].correct[k] / batches[1].denom[k]) / 2);
    assert(
      Math.abs(r.accs[0] - meanOfRatios[0]) > 0.3 && Math.abs(r.simulatedAcceptance - simulatedAcceptLength(meanOfRatios)) > 0.3,
      `sums-before-ratios ${r.accs} vs mean of ratios ${meanOfRatios}`,
    );

    // Counts past 2²⁴ stay exact (float32 accumulation would drop the two single tokens).
    const big = emptyEvalSums(1);
    for (const [c, d] of [
      [2 ** 24, 2 ** 24],
      [1, 1],
      [1, 1],
    ])
      addEvalBatch(big, 0, { ploss_0: 0, ploss_den_0: d, correct_0: c, denom_0: d, accept_sum_0: 0, accept_count_0: 0 });
    assertEqual(reduceEvalMetrics(big)!.lossTokens, 2 ** 24 + 2, 'Σdenom in float64');
    let f32 = 0;
    for (const d of [2 ** 24, 1, 1]) f32 = Math.fround(f32 + d);
    assert(f32 !== 2 ** 24 + 2, 'the same sum in float32 loses the single tokens');
    // Clamps: Σdenom 0 → accuracy 0 (max(·, 1)); a zero acceptance count → rate 0 (max(·, 1e-8)).
    const zero = emptyEvalSums(1);
    addEvalBatch(zero, 0.5, { ploss_0: 0.5, ploss_den_0: 4, correct_0: 0, denom_0: 0, accept_sum_0: 0, accept_count_0: 0 });
    const z = reduceEvalMetrics(zero)!;
    assertEqual(`${z.accs[0]} ${z.acceptanceRates[0]} ${z.simulatedAcceptance} ${z.loss}`, '0 0 0 0.5', 'clamped ratios');
    assertEqual(reduceEvalMetrics(emptyEvalSums(3)), undefined, 'no batch: nothing reported');
    assertThrows(() => addEvalBatch(emptyEvalSums(2), 0, { correct_0: 1 }), /metric "ploss_den_0" is missing/, 'missing metric');
  });

  t.test(
    "held-out capture of the fixture prompts → HeldOutEvaluator: SpecForge's numbers, sums before ratios over two batches, destroy releases",
    async (ctx) => {
      const gpu = new Gpu(ctx.gpu);
      const target = await loadTarget(ctx, gpu);
      const fx = await loadEagle3Fixture(ctx.fixture, '');
      const L = fx.inputs.tttLength;
      const ref = new SafetensorsFile(await ctx.fixture('eagle3/eagle3_reference.safetensors'), 'eagle3_reference.safetensors');
      const sequences = fixtureSequences(ref);
      const { backend, model, strategy } = draftFor(gpu, fx);
      const base = {
        gpu,
        source: new TargetFeatureSource(target),
        // SpecForge's own layers for this 6-layer target, [1, 2, 2] (SpecLab's default differs there).
        capture: { ...eagle3CaptureConfig(target.config, [1, 2, 2]), extra: { ttt_length: L } },
        sequences,
        tttLength: L,
      };

      const whole = await captureHeldOutBatches({ ...base, batchSize: 2 });
      assertEqual(whole.batches.length, 1, 'one batch of two');
      const evaluator = new HeldOutEvaluator(strategy, whole.batches);
      const m = (await evaluator.run())!;
      ctx.note('lossRelErrVsSpecForge', assertRelClose([m.loss], fx.expected('total_loss'), 1e-5, 'eval loss vs SpecForge total_loss'));
      assertRelClose(m.plosses, fx.expected('plosses'), 1e-5, 'eval plosses');
      assertRelClose(m.accs, fx.expected('acces'), 1e-5, 'eval per-position accuracy');
      assertRelClose(m.acceptanceRates, fx.expected('acceptance_rates'), 1e-5, 'eval acceptance rates');
      assertRelClose([m.simulatedAcceptance], [simulatedAcceptLength([...fx.expected('acces')])], 1e-5, 'simulated acceptance length');
      const again = (await evaluator.run())!;
      assert(
        sameBits([again.loss, ...again.accs, ...again.plosses], [m.loss, ...m.accs, ...m.plosses]),
        'the resident batches evaluate the same twice',
      );

      const split = await captureHeldOutBatches({ ...base, batchSize: 1 });
      assertEqual(split.batches.map((b) => b.tensors.input_ids.shape[1]).join(), '40,33', 'two batches of different lengths');
      assertEqual(
        split.batches.map((b) => `${b.sampleIds}:${b.refs.length}:${b.metadata.tttLength}`).join(),
        'heldout-0:0:4,heldout-1:0:4',
        'ids in order, no refs to ack, TTT length recorded',
      );
      const s = (await new HeldOutEvaluator(strategy, split.batches).run())!;
      // The expected answer from each batch's own evaluate, reduced here in float64.
      const per: { loss: number; m: Record<string, number> }[] = [];
      for (const b of split.batches) {
        const out = await strategy.evaluate(b);
        per.push({ loss: await out.loss, m: await out.metrics });
      }
      const ks = Array.from({ length: L }, (_, k) => k);
      const w = per.map((p) => ks.reduce((a, k) => a + p.m[`ploss_den_${k}`], 0));
      const W = w[0] + w[1];
      const accs = ks.map(
        (k) => (per[0].m[`correct_${k}`] + per[1].m[`correct_${k}`]) / Math.max(per[0].m[`denom_${k}`] + per[1].m[`denom_${k}`], 1),
      );
      assertRelClose(s.accs, accs, 1e-15, 'split: Σcorrect / Σdenom');
      assertRelClose(
        s.plosses,
        ks.map((k) => (per[0].m[`ploss_${k}`] * w[0] + per[1].m[`ploss_${k}`] * w[1]) / W),
        1e-15,
        'split: token-weighted ploss',
      );
      assertRelClose([s.loss], [(per[0].loss * w[0] + per[1].loss * w[1]) / W], 1e-15, 'split: token-weighted loss');
      assertRelClose(
        [s.simulatedAcceptance],
        [simulatedAcceptLength(accs)],
        1e-15,
        'split: simulated acceptance length of the pooled accuracies',
      );
      assert(sameBits(s.accs, m.accs), `accuracy counts do not depend on the split: ${s.accs} vs ${m.accs}`);
      const meanAccs = ks.map(
        (k) =>
          (per[0].m[`correct_${k}`] / Math.max(per[0].m[`denom_${k}`], 1) +
            per[1].m[`correct_${k}`] / Math.max(per[1].m[`denom_${k}`], 1)) /
          2,
      );
      const meanPloss0 = (per[0].m.ploss_0 + per[1].m.ploss_0) / 2;
      ctx.note('simLenSumsVsMeanOfRatios', `${s.simulatedAcceptance.toFixed(6)} vs ${simulatedAcceptLength(meanAccs).toFixed(6)}`);
      assert(
        Math.abs(s.plosses[0] - meanPloss0) > 1e-6 * meanPloss0,
        `ploss_0 ${s.plosses[0]} equals the mean of per-batch ratios ${meanPloss0}`,
      );
      assert(
        ks.some((k) => Math.abs(s.accs[k] - meanAccs[k]) > 1e-6),
        `accuracies ${s.accs} equal the mean of per-batch ratios ${meanAccs}`,
      );

      const live = gpu.pool.stats().liveBuffers;
      const held = bufferCount(whole.batches) + bufferCount(split.batches);
      whole.destroy();
      split.destroy();
      whole.destroy();
      assertEqual(live - gpu.pool.stats().liveBuffers, held, 'destroy releases every held-out tensor, once');
      assertThrows(() => whole.batches, /after destroy/, 'batches after destroy');
      model.destroy();
      backend.destroy();
      target.destroy();
      gpu.destroy();
    },
    { timeoutMs: 600_000 },
  );

  t.test(
    'refusals: no evaluate, no Gpu, an empty set, a bad batch size, a capture mismatch (its tensors freed)',
    async ({ gpu: ctx, fixture }) => {
      const gpu = new Gpu(ctx);
      const fx = await loadEagle3Fixture(fixture, '');
      const { backend, model, strategy } = draftFor(gpu, fx);
      const trainOnly: DraftTrainStrategy = {
        name: 'probe',
        requiredFeatures: [],
        validateBatch: () => undefined,
        forwardBackward: strategy.forwardBackward.bind(strategy),
      };
      assertThrows(() => new HeldOutEvaluator(trainOnly, []), /strategy "probe" has no forward-only evaluate/, 'strategy without evaluate');
      assertEqual(await new HeldOutEvaluator(strategy, []).run(), undefined, 'empty held-out set: nothing reported');
      const batch = fixtureBatch(gpu, fx);
      await assertRejects(
        () => new Eagle3TrainStrategy(model, { tttLength: 4 }).evaluate(batch),
        /evaluate needs the draft's Gpu/,
        'no Gpu',
      );
      const wrongTtt = makeTrainBatch({ ...batch, metadata: { targetRepr: 'logits', tttLength: 7 } });
      await assertRejects(() => new HeldOutEvaluator(strategy, [wrongTtt]).run(), /TTT length 7/, 'the evaluator validates each batch');
      const capture = {
        featureNames: ['input_ids', 'hidden_state', 'target', 'loss_mask'],
        auxLayerIds: [1, 2, 2],
        targetRepr: 'logits' as const,
        targetHiddenSize: 64,
        targetVocabSize: 384,
      };
      const base = { gpu, capture, sequences: [{ inputIds: [1, 2, 3], lossMask: [0, 1, 1] }], tttLength: 4 };
      const never = { generateFeatures: () => Promise.reject(new Error('not called')) };
      await assertRejects(
        () => captureHeldOutBatches({ ...base, source: never, batchSize: 0 }),
        /batchSize must be a positive integer/,
        'batch size 0',
      );
      const live = gpu.pool.stats().liveBuffers;
      const narrow = {
        generateFeatures: async () => [
          {
            tensors: {
              input_ids: gpu.zeros([3], 'i32'),
              loss_mask: gpu.zeros([3], 'i32'),
              hidden_state: gpu.zeros([3, 64], 'f32'),
              target: gpu.zeros([3, 384], 'f32'),
            },
            auxLayerIds: [1, 2, 2],
          },
        ],
      };
      await assertRejects(
        () => captureHeldOutBatches({ ...base, source: narrow, batchSize: 1 }),
        /sample heldout-0: aux hidden width 64 != 3 layers x 64/,
        'capture mismatch',
      );
      assertEqual(gpu.pool.stats().liveBuffers, live, "the refused capture's tensors are freed");
      releaseInputs(gpu, {
        inputIds: batch.tensors.input_ids,
        attentionMask: batch.tensors.attention_mask,
        lossMask: batch.tensors.loss_mask,
        hiddenStates: batch.tensors.hidden_state,
        target: batch.tensors.target,
      });
      model.destroy();
      backend.destroy();
      gpu.destroy();
    },
  );
});
