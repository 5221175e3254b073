/**
 * The EAGLE3 draft with its big tensors split into row parts, as the Llama-3.1-8B draft's fc,
 * gate/up/down and lm_head (and their grads and AdamW moments) are under a 128 MiB storage binding:
 * a reduced-width draft under a 12 KiB binding limit, so fc splits in 7 parts, q/gate/up/down/
 * lm_head in 3, k/v/o in 2, and the batch's hidden states and target logits by sequence. One
 * training step matches the float64 reference (src/reference/eagle3.ts) and the same step on an
 * unsplit GPU; the gradient-free evaluation forward gives the training step's losses; nothing leaks.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import type { GpuContext } from '../../src/gpu/context.ts';
import type { Eagle3Inputs } from '../../src/model/eagle3/inputs.ts';
import { Eagle3DraftModel } from '../../src/model/eagle3/model.ts';
import { gathersFromTable } from '../../src/kernels/rmsnorm-gather.ts';
import { AdamWBackend } from '../../src/optim/adamw-backend.ts';
import { eagle3EvalForward } from '../../src/model/eagle3/forward.ts';
import { assert, assertDeepEqual, assertEqual, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import type { Eagle3Config } from '../../src/config/eagle3-config.ts';
import { eagle3ParameterShapes } from '../../src/config/eagle3-config.ts';
import { eagle3StepReference } from '../../src/reference/eagle3.ts';
import { FIXTURE_OPTIMIZER, releaseInputs } from './eagle3-fixture.ts';
import { randomEagle3Problem, SPLITTABLE_DRAFT, uploadRandomInputs, type RandomProblemLayout } from './eagle3-random.ts';

/** Weights are wider than the batch's activations, so a binding limit can split the former only. */
const CONFIG: Eagle3Config = SPLITTABLE_DRAFT;
/** 12 KiB: every weight matrix splits (fc [64, 288] into 7 parts); no per-step activation does. */
const LIMIT = 12 * 1024;
/** Parts each weight (and its grad and moments) must have under LIMIT. */
const EXPECTED_PARTS: Readonly<Record<string, number>> = {
  'fc.weight': 7,
  'midlayer.self_attn.q_proj.weight': 3,
  'midlayer.self_attn.k_proj.weight': 2,
  'midlayer.self_attn.v_proj.weight': 2,
  'midlayer.self_attn.o_proj.weight': 2,
  'midlayer.mlp.gate_proj.weight': 3,
  'midlayer.mlp.up_proj.weight': 3,
  'midlayer.mlp.down_proj.weight': 3,
  'lm_head.weight': 3,
};
const SLOW = 300_000;

/** 2 sequences of 8 with different padding, 3 TTT steps. */
const LAYOUT: RandomProblemLayout = { seqLen: 8, lengths: [8, 6], usedOffset: 1, lossStart: 1 };
const problem = (c: Eagle3Config, seed: number) => randomEagle3Problem(c, seed, LAYOUT);

interface StepResult {
  evalLosses: Float32Array;
  losses: Float32Array;
  metricSums: Float32Array;
  grads: Float32Array[];
  gradNorm: number;
}

/** Evaluation forward, then one training step and the optimizer step's preclip norm, on `gpu`. */
async function runStep(
  gpu: Gpu,
  seed: number,
  check?: (backend: AdamWBackend, inputs: Eagle3Inputs, model: Eagle3DraftModel) => void,
  c: Eagle3Config = CONFIG,
  taps: Parameters<typeof eagle3EvalForward>[4] = {},
): Promise<StepResult> {
  const { values, inputs: x } = problem(c, seed);
  const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
  const model = new Eagle3DraftModel(gpu, backend, c, values, { t2d: x.t2d, d2t: x.d2t });
  const inputs = uploadRandomInputs(gpu, c, x);
  check?.(backend, inputs, model);
  const evalOut = await eagle3EvalForward(gpu, model.params, inputs, x.tttLength, taps);
  const out = await model.trainStep(inputs, { tttLength: x.tttLength, lossScale: 0.5 });
  const names = eagle3ParameterShapes(c).map(([n]) => n);
  const gradReads = names.map((n) => gpu.readLater(backend.param(n).grad) as Promise<Float32Array>);
  const report = await backend.optimizerStep();
  const result: StepResult = {
    evalLosses: await evalOut.losses,
    losses: await out.losses,
    metricSums: await out.metricSums,
    grads: await Promise.all(gradReads),
    gradNorm: await report.gradNorm,
  };
  releaseInputs(gpu, inputs);
  model.destroy();
  backend.destroy();
  // Only the loss kernels' per-Gpu placeholder binding survives.
  assertEqual(gpu.pool.stats().liveBuffers, 1, 'every GPU buffer released but the loss placeholder');
  return result;
}

/** A draft vocabulary wide enough that a step's logits [16, 256] (16 KiB) and teacher p, p̃ are over LIMIT (the head runs over row chunks), while its activations are not. */
const WIDE_VOCAB: Eagle3Config = { ...CONFIG, vocabSize: 512, draftVocabSize: 256 };

function splitGpu(ctx: GpuContext): Gpu {
  const gpu = new Gpu(ctx);
  Object.defineProperty(gpu, 'maxBindingBytes', { value: LIMIT });
  return gpu;
}

export default defineSuite('model/eagle3-split', (t) => {
  t.test(
    'weights, grads, moments and the batch split into row parts: one step matches float64 and the unsplit GPU',
    async ({ gpu: ctx, note }) => {
      const seed = 17;
      const split = splitGpu(ctx);
      const got = await runStep(split, seed, (backend, inputs, model) => {
        for (const [name, parts] of Object.entries(EXPECTED_PARTS)) {
          const p = backend.param(name);
          assertDeepEqual(
            [p.value, p.grad, p.m, p.v].map((x) => x.parts.length),
            [parts, parts, parts, parts],
            `${name} value/grad/m/v parts`,
          );
        }
        assertEqual(inputs.hiddenStates.parts.length, 2, 'hidden_state parts');
        assertEqual((inputs.target as Tensor).parts.length, 2, 'target parts');
        // A split table: input_layernorm gathers its rows first (the unsplit GPU's norm gathers them itself).
        assert(!gathersFromTable(model.params.embed), 'the embedding table is split');
      });
      split.destroy();
      const whole = new Gpu(ctx);
      const plain = await runStep(whole, seed);
      whole.destroy();

      const c = CONFIG;
      const { values, inputs: x } = problem(c, seed);
      const ref = eagle3StepReference(c, values, x, { lossScale: 0.5 });
      const names = eagle3ParameterShapes(c).map(([n]) => n);
      // f32 kernels against float64: the tolerances of test/model/eagle3.test.ts (1e-5 losses and
      // metric sums, 1e-4 per-parameter gradients); the preclip norm is a sum of squares, held to 1e-5.
      const refLosses = [...ref.steps.map((s) => s.ploss), ref.totalLoss];
      const lossErr = assertRelClose(got.losses, refLosses, 1e-5, 'plosses and total loss vs float64');
      assertRelClose(
        got.metricSums,
        ref.steps.flatMap((s) => [s.correct, s.denom, s.acceptSum, s.acceptCount]),
        1e-5,
        'metric sums vs float64',
      );
      let gradErr = 0;
      names.forEach((n, i) => (gradErr = Math.max(gradErr, assertRelClose(got.grads[i], ref.grads[n], 1e-4, `grad ${n} vs float64`))));
      const refNorm = Math.sqrt(names.reduce((acc, n) => acc + Array.from(ref.grads[n]).reduce((a, g) => a + g * g, 0), 0));
      const normErr = assertRelClose([got.gradNorm], [refNorm], 1e-5, 'grad_norm_preclip vs float64');

      // Split vs unsplit GPU differ only in how the split products are summed (per part and per
      // row segment instead of one matmul): within 2e-6 relative (measured 5e-7), far inside the float64 bounds.
      const vsPlain = Math.max(
        assertRelClose(got.losses, plain.losses, 2e-6, 'losses vs unsplit GPU'),
        assertRelClose([got.gradNorm], [plain.gradNorm], 2e-6, 'grad norm vs unsplit GPU'),
        ...names.map((n, i) => assertRelClose(got.grads[i], plain.grads[i], 2e-6, `grad ${n} vs unsplit GPU`)),
      );
      assertRelClose(got.metricSums, plain.metricSums, 2e-6, 'metric sums vs unsplit GPU');
      // The evaluation forward issues the training forward's kernels: the same losses, bit for bit.
      assert(
        Array.from(got.evalLosses).every((v, i) => Object.is(v, got.losses[i])),
        'evaluation forward losses equal the training step losses',
      );
      note('lossRelErr', lossErr.toExponential(2));
      note('gradRelErr', gradErr.toExponential(2));
      note('gradNormRelErr', normErr.toExponential(2));
      note('splitVsUnsplitRelErr', vsPlain.toExponential(2));
    },
    { timeoutMs: SLOW },
  );

  t.test(
    "a step's head over row chunks (a draft vocabulary wider than a binding's worth of rows): matches float64 and the unsplit GPU",
    async ({ gpu: ctx, note }) => {
      const seed = 19;
      const split = splitGpu(ctx);
      // The logits [16, 256] (16 KiB) are over the binding (12 KiB, 12 rows): each step's head runs in two balanced
      // chunks of 8 rows (gpu/row-chunks.ts), one part each.
      const chunks: string[] = [];
      const got = await runStep(split, seed, undefined, WIDE_VOCAB, {
        logits: async (k, logits, firstRow) => void chunks.push(`${k}:${firstRow}+${logits.shape[0]}/${logits.parts.length}`),
      });
      split.destroy();
      const steps = got.losses.length - 1;
      assertDeepEqual(
        chunks,
        Array.from({ length: steps }, (_, k) => [`${k}:0+8/1`, `${k}:8+8/1`]).flat(),
        "every step's logits in two chunks of one part",
      );
      const whole = new Gpu(ctx);
      const plain = await runStep(whole, seed, undefined, WIDE_VOCAB);
      whole.destroy();
      const { values, inputs: x } = problem(WIDE_VOCAB, seed);
      const ref = eagle3StepReference(WIDE_VOCAB, values, x, { lossScale: 0.5 });
      const names = eagle3ParameterShapes(WIDE_VOCAB).map(([n]) => n);
      note(
        'lossRelErr',
        assertRelClose(got.losses, [...ref.steps.map((s) => s.ploss), ref.totalLoss], 1e-5, 'losses vs float64').toExponential(2),
      );
      assertRelClose(
        got.metricSums,
        ref.steps.flatMap((s) => [s.correct, s.denom, s.acceptSum, s.acceptCount]),
        1e-5,
        'metric sums vs float64',
      );
      names.forEach((n, i) => assertRelClose(got.grads[i], ref.grads[n], 1e-4, `grad ${n} vs float64`));
      note('splitVsUnsplitRelErr', assertRelClose(got.losses, plain.losses, 2e-6, 'losses vs unsplit GPU').toExponential(2));
    },
    { timeoutMs: SLOW },
  );
});
