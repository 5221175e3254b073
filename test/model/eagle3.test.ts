/**
 * The GPU EAGLE3 draft (src/model/eagle3) against SpecForge (fixtures/eagle3, both variants): from
 * param.* and the fixture inputs, one micro-step reproduces the per-step logits and hidden outputs,
 * plosses / acces / acceptance_rates / total_loss, every grad.*, grad_norm_preclip, and after one
 * AdamW step configured as the fixture's (lr 1e-3, β 0.9/0.95, ε 1e-8, wd 0.01, clip 0.5) every
 * after_step.*. Also: bad inputs are refused naming the tensor, and nothing leaks.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { metricRatios } from '../../src/kernels/metrics.ts';
import { clipGradients, globalGradNorm, gradNormWorkspaceSize } from '../../src/kernels/optim.ts';
import { Eagle3DraftModel } from '../../src/model/eagle3/model.ts';
import { initialEagle3Weights } from '../../src/model/eagle3/parameters.ts';
import { AdamWBackend } from '../../src/optim/adamw-backend.ts';
import { assertDeepEqual, assertEqual, assertRejects, assertRelClose, assertThrows } from '../harness/assert.ts';
import { f16ToF32Ref, f32ToF16Ref } from '../../src/reference/cast.ts';
import { defineSuite } from '../harness/suite.ts';
import type { Eagle3Config } from '../../src/config/eagle3-config.ts';
import { EMBED_NAME, eagle3ParameterShapes, parseEagle3Config } from '../../src/config/eagle3-config.ts';
import { eagle3StepReference } from '../../src/reference/eagle3.ts';
import { Rng } from '../../src/util/random.ts';
import { FIXTURE_OPTIMIZER, loadEagle3Fixture, releaseInputs, uploadFixtureInputs, VARIANTS } from './eagle3-fixture.ts';
import { randomEagle3Problem, uploadRandomInputs } from './eagle3-random.ts';

/** A random problem unlike the fixture: odd S, 3 sequences with different padding, MQA, Ht ≠ H, 3 TTT steps. */
const randomProblem = (c: Eagle3Config, seed: number) =>
  randomEagle3Problem(c, seed, { seqLen: 19, lengths: [19, 12, 16], usedOffset: 3, lossStart: 2 });

/** Generous limit: first-use pipeline compilation on a software adapter shared with other jobs can take a minute. */
const SLOW = 300_000;

const RANDOM_CONFIG: Eagle3Config = {
  hiddenSize: 64,
  intermediateSize: 96,
  numHeads: 4,
  numKvHeads: 1,
  headDim: 16,
  vocabSize: 50,
  draftVocabSize: 20,
  targetHiddenSize: 24,
  rmsNormEps: 1e-5,
  ropeTheta: 500000,
  maxPositionEmbeddings: 64,
};

/** One micro-step of a random problem on the GPU against the float64 reference: outputs, losses, metric sums, gradients. */
async function compareWithReference(
  gpu: Gpu,
  c: Eagle3Config,
  seed: number,
  lossScale: number,
  note: (k: string, v: string) => void,
  stacked = true,
): Promise<void> {
  const { values, inputs: x } = randomProblem(c, seed);
  const ref = eagle3StepReference(c, values, x, { lossScale });
  const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
  const model = new Eagle3DraftModel(gpu, backend, c, values, { t2d: x.t2d, d2t: x.d2t });
  // Which paths run: one projection on the stacked q | k | v and gate | up weights, or one per weight.
  assertEqual(model.params.qkv !== undefined, stacked, 'q, k and v stacked in the arena');
  assertEqual(model.params.gateUp !== undefined, stacked, 'gate and up stacked in the arena');
  const inputs = uploadRandomInputs(gpu, c, x);
  const out = await model.trainStep(inputs, { tttLength: x.tttLength, lossScale, capture: true });
  const names = eagle3ParameterShapes(c).map(([n]) => n);
  const grads = names.map((p) => gpu.readLater(backend.param(p).grad));
  let worstFwd = 0;
  for (let k = 0; k < x.tttLength; k++) {
    worstFwd = Math.max(worstFwd, assertRelClose(await out.stepLogits![k], ref.steps[k].logits, 1e-5, `logits step ${k}`));
    worstFwd = Math.max(worstFwd, assertRelClose(await out.stepHidden![k], ref.steps[k].hidden, 1e-5, `hidden step ${k}`));
  }
  assertRelClose(await out.losses, [...ref.steps.map((s) => s.ploss), ref.totalLoss], 1e-5, 'losses');
  assertRelClose(
    await out.metricSums,
    ref.steps.flatMap((s) => [s.correct, s.denom, s.acceptSum, s.acceptCount]),
    1e-5,
    'metric sums',
  );
  let worstGrad = 0;
  let worstName = '';
  for (let i = 0; i < names.length; i++) {
    const e = assertRelClose(await grads[i], ref.grads[names[i]], 1e-4, `grad ${names[i]}`);
    if (e > worstGrad) [worstGrad, worstName] = [e, names[i]];
  }
  note('forwardRelErr', worstFwd.toExponential(2));
  note('gradRelErr', `${worstGrad.toExponential(2)} (${worstName})`);
  releaseInputs(gpu, inputs);
  model.destroy();
  backend.destroy();
  // Only the loss kernels' per-Gpu placeholder binding survives.
  assertEqual(gpu.pool.stats().liveBuffers, 1, 'every GPU buffer released but the loss placeholder');
}

export default defineSuite('model/eagle3', (t) => {
  t.test('draft config: the fixture config gives the fixture parameter shapes; unsupported variants are refused', async ({ fixture }) => {
    const fx = await loadEagle3Fixture(fixture, '');
    for (const [name, shape] of eagle3ParameterShapes(fx.config))
      assertDeepEqual(shape, [...fx.file.shape(`param.${name}`)], `shape of ${name}`);
    assertDeepEqual([...fx.file.shape(`param.${EMBED_NAME}`)], [fx.config.vocabSize, fx.config.hiddenSize], 'embedding shape');
    const base = JSON.parse(new TextDecoder().decode(await fixture('eagle3/draft_config.json'))) as Record<string, unknown>;
    assertThrows(() => parseEagle3Config({ ...base, fc_norm: true }, 'cfg'), /cfg: fc_norm/, 'fc_norm');
    assertThrows(() => parseEagle3Config({ ...base, norm_output: false }, 'cfg'), /cfg: norm_output=false/, 'norm_output');
    assertThrows(
      () => parseEagle3Config({ ...base, rope_scaling: { rope_type: 'llama3', factor: 8 } }, 'cfg'),
      /cfg: rope_scaling/,
      'rope scaling',
    );
    assertThrows(() => parseEagle3Config({ ...base, num_hidden_layers: 2 }, 'cfg'), /num_hidden_layers must be 1/, 'layers');
    assertThrows(() => parseEagle3Config({ ...base, num_key_value_heads: 3 }, 'cfg'), /not a multiple of num_key_value_heads 3/, 'gqa');
    assertThrows(
      () => parseEagle3Config({ ...base, hidden_size: undefined }, 'cfg'),
      /cfg: invalid EAGLE3 draft config \(hidden_size/,
      'missing field',
    );
    assertEqual(parseEagle3Config({ ...base, draft_vocab_size: undefined }).draftVocabSize, 384, 'draft vocab falls back to vocab_size');
  });

  t.test(
    'GPU draft vs float64 reference on a random problem (MQA, 3 padded rows, odd S, loss scale 0.25)',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      await compareWithReference(gpu, RANDOM_CONFIG, 11, 0.25, note);
      gpu.destroy();
    },
    { timeoutMs: SLOW },
  );

  t.test(
    'sizes off the binding alignment take the copy paths (z halves, K/V slots, q/k/v and gate/up apart) and still match the reference',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const align = ctx.limits.minStorageBufferOffsetAlignment ?? 256;
      // H · 4 bytes is a multiple of the alignment for H = 64 (the path above); H = align/4 + 2 is not.
      // A K/V slot (57 rows × 8) is off it too from step 1 on, and so are W_k (8 × 2H · 4 bytes) and
      // W_gate (97 × H · 4 bytes): the arena does not place W_v and W_up right after them, and the
      // attention and the MLP run one projection per weight.
      const c: Eagle3Config = { ...RANDOM_CONFIG, hiddenSize: align / 4 + 2, intermediateSize: 97, numHeads: 2, numKvHeads: 1, headDim: 8 };
      await compareWithReference(gpu, c, 3, 1, note, false);
      gpu.destroy();
    },
    { timeoutMs: SLOW },
  );

  for (const { name, prefix } of VARIANTS) {
    t.test(
      `GPU draft vs SpecForge (${name}): forward, losses, metrics, gradients, grad norm, clipped gradients, AdamW step`,
      async ({ gpu: ctx, fixture, note }) => {
        const gpu = new Gpu(ctx);
        const fx = await loadEagle3Fixture(fixture, prefix);
        const L = fx.inputs.tttLength;
        const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
        const model = new Eagle3DraftModel(gpu, backend, fx.config, fx.params, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
        const inputs = uploadFixtureInputs(gpu, fx);
        const out = await model.trainStep(inputs, { tttLength: L, lossScale: 1, capture: true });
        const grads = fx.trainable.map((p) => gpu.readLater(backend.param(p).grad));
        // grad_clipped.*: clip copies of the gradients the way clip_grad_norm_ does (the backend fuses
        // the clip into AdamW and never materialises them).
        const clipped = fx.trainable.map((p) => gpu.clone(backend.param(p).grad));
        const partials = gpu.tensor([gradNormWorkspaceSize(clipped)], 'f32', 'partials');
        const normResult = gpu.tensor([2], 'f32', 'norm');
        await globalGradNorm(gpu, clipped, partials, normResult, { maxNorm: FIXTURE_OPTIMIZER.maxGradNorm });
        await clipGradients(gpu, clipped, normResult);
        const clippedReads = clipped.map((g) => gpu.readLater(g));
        const report = await backend.optimizerStep();
        const after = fx.trainable.map((p) => gpu.readLater(backend.param(p).value));
        await gpu.sync();

        let worstFwd = 0;
        for (let k = 0; k < L; k++) {
          worstFwd = Math.max(
            worstFwd,
            assertRelClose(await out.stepLogits![k], fx.expected(`step_logits.${k}`), 1e-5, `step_logits.${k}`),
          );
          worstFwd = Math.max(
            worstFwd,
            assertRelClose(await out.stepHidden![k], fx.expected(`step_hidden.${k}`), 1e-5, `step_hidden.${k}`),
          );
        }
        const losses = await out.losses;
        const sums = await out.metricSums;
        const ratios = Array.from({ length: L }, (_, k) => metricRatios(sums, k));
        const worstLoss = Math.max(
          assertRelClose(losses.slice(0, L), fx.expected('plosses'), 1e-5, 'plosses'),
          assertRelClose(
            ratios.map((r) => r.acc),
            fx.expected('acces'),
            1e-5,
            'acces',
          ),
          assertRelClose(
            ratios.map((r) => r.acceptanceRate),
            fx.expected('acceptance_rates'),
            1e-5,
            'acceptance_rates',
          ),
          assertRelClose([losses[L]], fx.expected('total_loss'), 1e-5, 'total_loss'),
        );
        let worstGrad = 0;
        let worstGradName = '';
        for (let i = 0; i < fx.trainable.length; i++) {
          const p = fx.trainable[i];
          const e = assertRelClose(await grads[i], fx.expected(`grad.${p}`), 1e-4, `grad.${p}`);
          if (e > worstGrad) [worstGrad, worstGradName] = [e, p];
        }
        const normErr = assertRelClose([await report.gradNorm], fx.expected('grad_norm_preclip'), 1e-5, 'grad_norm_preclip');
        let worstClipped = 0;
        for (let i = 0; i < fx.trainable.length; i++) {
          const p = fx.trainable[i];
          worstClipped = Math.max(
            worstClipped,
            assertRelClose(await clippedReads[i], fx.expected(`grad_clipped.${p}`), 1e-4, `grad_clipped.${p}`),
          );
        }
        gpu.release(...clipped, partials, normResult);
        let worstAfter = 0;
        let worstAfterName = '';
        for (let i = 0; i < fx.trainable.length; i++) {
          const p = fx.trainable[i];
          const e = assertRelClose(await after[i], fx.expected(`after_step.${p}`), 1e-5, `after_step.${p}`);
          if (e > worstAfter) [worstAfter, worstAfterName] = [e, p];
        }
        note('forwardRelErr', worstFwd.toExponential(2));
        note('lossMetricRelErr', worstLoss.toExponential(2));
        note('gradRelErr', `${worstGrad.toExponential(2)} (${worstGradName})`);
        note('gradNormRelErr', normErr.toExponential(2));
        note('gradClippedRelErr', worstClipped.toExponential(2));
        note('afterStepRelErr', `${worstAfter.toExponential(2)} (${worstAfterName})`);
        releaseInputs(gpu, inputs);
        model.destroy();
        backend.destroy();
        // The one survivor is the loss kernels' per-Gpu placeholder binding (src/kernels/loss-rows.ts).
        assertEqual(gpu.pool.stats().liveBuffers, 1, 'every GPU buffer released but the loss placeholder');
        gpu.destroy();
      },
      { timeoutMs: SLOW },
    );
  }

  t.test(
    'fresh weights: N(0, 0.02²) matrices, unit norms, the target embedding; a short run lowers the loss',
    async ({ gpu: ctx, note }) => {
      const c = RANDOM_CONFIG;
      const { values, inputs: x } = randomProblem(c, 5);
      const init = initialEagle3Weights(c, values[EMBED_NAME], new Rng(1));
      for (const [name, shape] of eagle3ParameterShapes(c)) {
        const v = init[name];
        if (shape.length === 1) {
          assertEqual(
            v.every((e) => e === 1),
            true,
            `${name} is all ones`,
          );
        } else {
          const std = Math.sqrt(v.reduce((a, e) => a + e * e, 0) / v.length);
          assertEqual(Math.abs(std - 0.02) < 0.004, true, `${name} std ${std}`);
        }
      }
      assertThrows(() => initialEagle3Weights(c, new Float32Array(3), new Rng(1)), /embedding has 3 values/, 'embedding size');
      const gpu = new Gpu(ctx);
      const backend = new AdamWBackend(gpu, { ...FIXTURE_OPTIMIZER, lr: 3e-3, weightDecay: 0 });
      const model = new Eagle3DraftModel(gpu, backend, c, init, { t2d: x.t2d, d2t: x.d2t });
      const inputs = uploadRandomInputs(gpu, c, x);
      const losses: number[] = [];
      for (let step = 0; step < 30; step++) {
        const out = await model.trainStep(inputs, { tttLength: 3, lossScale: 1 });
        await backend.optimizerStep();
        losses.push((await out.losses)[3]);
      }
      note('lossFirst', losses[0].toFixed(4));
      note('lossLast', losses[29].toFixed(4));
      assertEqual(losses[29] < 0.8 * losses[0], true, `loss falls when overfitting one batch: ${losses[0]} → ${losses[29]}`);
      releaseInputs(gpu, inputs);
      model.destroy();
      backend.destroy();
      gpu.destroy();
    },
    { timeoutMs: SLOW },
  );

  t.test(
    "a draft borrowing the target's embedding table (f32, or f16 storage of f16-exact values) trains bit-identically to one holding an f32 copy",
    async ({ gpu: ctx }) => {
      const c = RANDOM_CONFIG;
      const { values, inputs: x } = randomProblem(c, 6);
      // f16-exact embedding values, so the f16 table holds exactly what the f32 copy holds.
      const embedBits = Uint16Array.from(values[EMBED_NAME], f32ToF16Ref);
      const embed = Float32Array.from(embedBits, f16ToF32Ref);
      const gpu = new Gpu(ctx);
      const run = async (frozen: 'copy' | 'f32' | 'f16') => {
        const backend = new AdamWBackend(gpu, { ...FIXTURE_OPTIMIZER, lr: 3e-3 });
        const table =
          frozen === 'f32'
            ? gpu.upload([c.vocabSize, c.hiddenSize], 'f32', embed, 'target.embed')
            : frozen === 'f16'
              ? gpu.upload([c.vocabSize, c.hiddenSize], 'f16', embedBits, 'target.embed16')
              : undefined;
        const init = initialEagle3Weights(c, table ? 'shared' : embed, new Rng(2));
        assertEqual(EMBED_NAME in init, !table, `${frozen}: the embedding is copied only without a shared table`);
        const model = new Eagle3DraftModel(gpu, backend, c, init, { t2d: x.t2d, d2t: x.d2t }, { embed: table });
        const inputs = uploadRandomInputs(gpu, c, x);
        const losses: number[] = [];
        for (let step = 0; step < 3; step++) {
          const out = await model.trainStep(inputs, { tttLength: 3, lossScale: 1 });
          await backend.optimizerStep();
          losses.push(...(await out.losses));
        }
        const weights = await Promise.all(eagle3ParameterShapes(c).map(([n]) => gpu.read(backend.param(n).value)));
        releaseInputs(gpu, inputs);
        model.destroy();
        // The draft never releases a borrowed table: releasing it here would throw "released twice" otherwise.
        if (table) gpu.release(table);
        backend.destroy();
        return { losses, weights };
      };
      try {
        const copy = await run('copy');
        for (const frozen of ['f32', 'f16'] as const) {
          const shared = await run(frozen);
          assertDeepEqual(shared.losses, copy.losses, `${frozen}: losses`);
          shared.weights.forEach((w, i) => assertDeepEqual([...w], [...copy.weights[i]], `${frozen}: weight ${i} after 3 steps`));
        }
        // Only the loss kernels' per-Gpu placeholder binding survives (as in model/eagle3-split).
        assertEqual(gpu.pool.stats().liveBuffers, 1, 'nothing leaked but the loss placeholder');
      } finally {
        gpu.destroy();
      }
    },
    { timeoutMs: SLOW },
  );

  t.test('bad inputs are refused naming the tensor', async ({ gpu: ctx, fixture }) => {
    const gpu = new Gpu(ctx);
    const fx = await loadEagle3Fixture(fixture, '');
    const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
    const model = new Eagle3DraftModel(gpu, backend, fx.config, fx.params, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
    const inputs = uploadFixtureInputs(gpu, fx);
    const { batch: B, seqLen: S } = fx.inputs;
    const wrongHidden = gpu.tensor([B, S, 64], 'f32', 'aux');
    await assertRejects(
      () => model.trainStep({ ...inputs, hiddenStates: wrongHidden }, { tttLength: 4, lossScale: 1 }),
      /hidden_state \(aux\) must have shape \[2, 40, 192\]/,
      'aux width',
    );
    const floatIds = gpu.tensor([B, S], 'f32', 'ids');
    await assertRejects(
      () => model.trainStep({ ...inputs, inputIds: floatIds }, { tttLength: 4, lossScale: 1 }),
      /input_ids \(ids\) must be i32/,
      'ids dtype',
    );
    await assertRejects(
      () => model.trainStep(inputs, { tttLength: 0, lossScale: 1 }),
      /tttLength must be a positive integer/,
      'ttt length',
    );
    const bad = { ...fx.params };
    delete (bad as Record<string, unknown>)['norm.weight'];
    const backend2 = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
    let thrown = '';
    try {
      new Eagle3DraftModel(gpu, backend2, fx.config, bad, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
    } catch (err) {
      thrown = (err as Error).message;
    }
    assertEqual(/missing norm\.weight/.test(thrown), true, `missing parameter error: "${thrown}"`);
    gpu.release(wrongHidden, floatIds);
    releaseInputs(gpu, inputs);
    model.destroy();
    backend.destroy();
    backend2.destroy();
    gpu.destroy();
  });
});
