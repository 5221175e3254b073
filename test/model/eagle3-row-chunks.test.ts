/**
 * Row chunks of a TTT step: the head (src/model/eagle3/step-head.ts, teacher-source.ts: the draft's
 * logits, the teacher, the metrics, the loss and the lm_head backward, no [R, D] tensor whole) and the
 * MLP (mlp-chunks.ts: gate, up and act a chunk at a time, encoded again in the backward). Against the
 * one-chunk step on the same problem, within 1e-6 relative: the losses, the metric sums, every
 * gradient, the preclip norm and the weights after one AdamW step, in training and in the
 * gradient-free mode. A row's values are computed by the same kernels either way, so on this adapter
 * most come out the same bits (the note counts them); the weight gradients of chunked matmuls are
 * summed chunk by chunk. For full-vocabulary logits and for compact features (the target's hidden
 * state and the draft rows of its lm_head), with chunks that cut sequences anywhere (7 rows, and 1
 * row, of 2 × 24), with activation recompute. f16 features (aux hidden states and the compact
 * target's hidden state) are read by the draft a row chunk at a time (fc-chunks.ts): against the f32
 * step on the same f16-rounded values, the same bits in one chunk, within 1e-6 over chunks. Compact
 * features train as the full logits they stand for (within 1e-5), and the chunked step against float64.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import { Eagle3DraftModel } from '../../src/model/eagle3/model.ts';
import { eagle3EvalForward } from '../../src/model/eagle3/forward.ts';
import type { Eagle3Inputs } from '../../src/model/eagle3/inputs.ts';
import { AdamWBackend } from '../../src/optim/adamw-backend.ts';
import { assertEqual, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { eagle3ParameterShapes, type Eagle3Config } from '../../src/config/eagle3-config.ts';
import { eagle3StepReference, type Eagle3RefInputs } from '../../src/reference/eagle3.ts';
import { castF16ToF32Ref, castF32ToF16Ref } from '../../src/reference/cast.ts';
import { Rng } from '../../src/util/random.ts';
import { FIXTURE_OPTIMIZER, releaseInputs } from './eagle3-fixture.ts';
import {
  randomEagle3Problem,
  readTrainedStep,
  SPLITTABLE_DRAFT,
  uploadRandomInputs,
  type RandomProblemLayout,
  type TrainedStep,
} from './eagle3-random.ts';

const CONFIG: Eagle3Config = SPLITTABLE_DRAFT;
const LAYOUT: RandomProblemLayout = { seqLen: 24, lengths: [24, 19], usedOffset: 1, lossStart: 1 };
const ROWS = 48;
/** The target's final hidden size of the compact features. */
const HT = 40;

/** The target behind compact features: hidden [R, Ht] and lm_head [V, Ht], and the full logits they make. */
interface CompactTarget {
  hidden: Float32Array;
  lmHead: Float32Array;
  /** hidden · lm_headᵀ, in float64 rounded once: what a logits-feature run receives. */
  logits: Float32Array;
  lse: Float32Array;
  tok: Int32Array;
}

function compactTarget(seed: number, x: Eagle3RefInputs): CompactTarget {
  const rng = new Rng(seed);
  const V = CONFIG.vocabSize;
  const hidden = rng.floats(ROWS * HT, 1);
  const lmHead = rng.floats(V * HT, 0.6);
  const used = Array.from({ length: CONFIG.draftVocabSize }, (_, i) => i + x.d2t[i]);
  // A clear draft-vocabulary winner in most rows, as the random problem's logits have.
  for (let r = 0; r < ROWS; r++)
    if (r % 3 !== 0) for (let j = 0; j < HT; j++) lmHead[used[(r * 7) % used.length] * HT + j] += 0.02 * hidden[r * HT + j];
  const logits = new Float32Array(ROWS * V);
  const lse = new Float32Array(ROWS);
  const tok = new Int32Array(ROWS);
  for (let r = 0; r < ROWS; r++) {
    const row = Array.from({ length: V }, (_, v) => {
      let s = 0;
      for (let j = 0; j < HT; j++) s += hidden[r * HT + j] * lmHead[v * HT + j];
      return s;
    });
    const max = Math.max(...row);
    lse[r] = max + Math.log(row.reduce((a, z) => a + Math.exp(z - max), 0));
    tok[r] = row.indexOf(max);
    row.forEach((z, v) => (logits[r * V + v] = z));
  }
  return { hidden, lmHead, logits, lse, tok };
}

/** Features as the store holds them: f32, or f16 (the values must already be f16-rounded to compare). */
type Features = 'f32' | 'f16';
const roundToF16 = (x: ArrayLike<number>) => castF16ToF32Ref(castF32ToF16Ref(x).bits);

/** `values` [shape] uploaded at `features` precision. */
function uploadFeature(gpu: Gpu, shape: number[], values: ArrayLike<number>, features: Features, label: string): Tensor {
  return features === 'f16' ? gpu.upload(shape, 'f16', castF32ToF16Ref(values).bits, label) : gpu.upload(shape, 'f32', values, label);
}

function uploadCompact(gpu: Gpu, x: Eagle3RefInputs, t: CompactTarget, features: Features): Eagle3Inputs {
  const base = uploadRandomInputs(gpu, CONFIG, x);
  gpu.release(base.target as Tensor);
  if (features === 'f16') {
    gpu.release(base.hiddenStates);
    base.hiddenStates = uploadFeature(gpu, [x.batch, x.seqLen, 3 * CONFIG.targetHiddenSize], x.hiddenStates, 'f16', 'hidden_state');
  }
  const used = Array.from({ length: CONFIG.draftVocabSize }, (_, i) => i + x.d2t[i]);
  const head = Float32Array.from({ length: CONFIG.draftVocabSize * HT }, (_, i) => t.lmHead[used[Math.floor(i / HT)] * HT + (i % HT)]);
  const [B, S] = [x.batch, x.seqLen];
  return {
    ...base,
    target: {
      hidden: uploadFeature(gpu, [B, S, HT], t.hidden, features, 'target.hidden'),
      head: gpu.upload([CONFIG.draftVocabSize, HT], 'f32', head, 'target.head'),
      lse: gpu.upload([B, S], 'f32', t.lse, 'target.lse'),
      tok: gpu.upload([B, S], 'i32', t.tok, 'target.tok'),
    },
  };
}

interface StepBits extends TrainedStep {
  evalLosses: Float32Array;
  evalMetrics: Float32Array;
}

interface Variant {
  /** Rows per chunk of the head and of the MLP. */
  head: number;
  mlp: number;
  compact: boolean;
  recompute: boolean;
  /** Compact features only: f16 aux and target hidden states, read by the fc this many rows a chunk. */
  f16Fc?: number;
  /** f32 features holding f16-rounded values (what the f16 runs are compared with). */
  rounded?: boolean;
}

async function trainStep(gpu: Gpu, seed: number, v: Variant): Promise<StepBits> {
  const problem = randomEagle3Problem(CONFIG, seed, LAYOUT);
  const { values } = problem;
  const exact = compactTarget(seed + 1, problem.inputs);
  // f16 features and the f32 runs they are compared with hold the same f16-rounded values.
  const rounded = v.f16Fc !== undefined || v.rounded === true;
  const x = rounded ? { ...problem.inputs, hiddenStates: roundToF16(problem.inputs.hiddenStates) } : problem.inputs;
  const target = rounded ? { ...exact, hidden: roundToF16(exact.hidden) } : exact;
  const refInputs = v.compact ? x : { ...x, target: target.logits };
  const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
  const model = new Eagle3DraftModel(gpu, backend, CONFIG, values, { t2d: x.t2d, d2t: x.d2t });
  const inputs = v.compact
    ? uploadCompact(gpu, x, target, v.f16Fc === undefined ? 'f32' : 'f16')
    : uploadRandomInputs(gpu, CONFIG, refInputs);
  const chunks = { headChunkRows: v.head, mlpChunkRows: v.mlp, ...(v.f16Fc === undefined ? {} : { fcChunkRows: v.f16Fc }) };
  const evalOut = await eagle3EvalForward(gpu, model.params, inputs, x.tttLength, {}, chunks);
  const out = await model.trainStep(inputs, { tttLength: x.tttLength, lossScale: 0.5, recompute: v.recompute, ...chunks });
  const bits: StepBits = {
    ...(await readTrainedStep(gpu, backend, CONFIG, out)),
    evalLosses: await evalOut.losses,
    evalMetrics: await evalOut.metricSums,
  };
  releaseInputs(gpu, inputs);
  model.destroy();
  backend.destroy();
  assertEqual(gpu.pool.stats().liveBuffers, 1, `${JSON.stringify(v)}: every GPU buffer released but the loss placeholder`);
  return bits;
}

/** Asserts the chunked step within 1e-6 relative of the whole one; returns how many of its arrays are the same bits. */
function assertChunkedMatches(got: StepBits, whole: StepBits, what: string): { same: number; of: number } {
  const names = eagle3ParameterShapes(CONFIG).map(([n]) => n);
  const pairs: [string, ArrayLike<number>, ArrayLike<number>][] = [
    ['losses', got.losses, whole.losses],
    ['metric sums', got.metricSums, whole.metricSums],
    ['gradient-free losses', got.evalLosses, whole.evalLosses],
    ['gradient-free metric sums', got.evalMetrics, whole.evalMetrics],
    ...names.map((n, i) => [`grad ${n}`, got.grads[i], whole.grads[i]] as [string, Float32Array, Float32Array]),
    ['preclip grad norm', [got.gradNorm], [whole.gradNorm]],
    ...names.map((n, i) => [`${n} after one AdamW step`, got.updated[i], whole.updated[i]] as [string, Float32Array, Float32Array]),
  ];
  let same = 0;
  for (const [name, a, b] of pairs) {
    assertRelClose(a, b, 1e-6, `${what}: ${name}`);
    if (sameBits(a, b)) same++;
  }
  return { same, of: pairs.length };
}

const WHOLE = { head: ROWS, mlp: ROWS };

export default defineSuite('model/eagle3-row-chunks', (t) => {
  t.test(
    'a step over row chunks (head, MLP, both) gives the one-chunk step: losses, metrics, every gradient, one AdamW step',
    async ({ gpu: ctx, note }) => {
      const seed = 31;
      const gpu = new Gpu(ctx);
      try {
        for (const compact of [false, true]) {
          const whole = await trainStep(gpu, seed, { ...WHOLE, compact, recompute: false });
          for (const [head, mlp, recompute] of [
            [7, ROWS, false],
            [1, ROWS, false],
            [ROWS, 7, false],
            [ROWS, 1, false],
            [7, 5, true],
            [ROWS, 7, true],
          ] as const) {
            const label = `${compact ? 'compact' : 'logits'} features, head ${head}, MLP ${mlp} rows a chunk${recompute ? ', recompute' : ''}`;
            const { same, of } = assertChunkedMatches(await trainStep(gpu, seed, { head, mlp, compact, recompute }), whole, label);
            note(label, `${same} of ${of} the same bits`);
          }
          if (compact) {
            // f16 features: the fc and the teacher widen them a row chunk at a time.
            const f32 = await trainStep(gpu, seed, { ...WHOLE, compact, recompute: false, rounded: true });
            const { same, of } = assertChunkedMatches(
              await trainStep(gpu, seed, { ...WHOLE, compact, recompute: false, f16Fc: ROWS }),
              f32,
              'f16',
            );
            assertEqual(same, of, 'f16 features in one chunk: the bits of the f32 step on the same values');
            for (const [head, fc] of [
              [7, 5],
              [ROWS, 1],
            ] as const) {
              const label = `f16 compact features, head ${head}, fc ${fc} rows a chunk, recompute`;
              const got = await trainStep(gpu, seed, { head, mlp: 5, compact, recompute: true, f16Fc: fc });
              note(label, `${assertChunkedMatches(got, f32, label).same} of ${of} the same bits`);
            }
          }
          if (!compact) {
            // And the chunked step against float64 with model/eagle3's tolerances.
            const { values, inputs: x } = randomEagle3Problem(CONFIG, seed, LAYOUT);
            const ref = eagle3StepReference(CONFIG, values, { ...x, target: compactTarget(seed + 1, x).logits }, { lossScale: 0.5 });
            const chunked = await trainStep(gpu, seed, { head: 7, mlp: 5, compact, recompute: false });
            assertRelClose(chunked.losses, [...ref.steps.map((s) => s.ploss), ref.totalLoss], 1e-5, 'losses vs float64');
            const names = eagle3ParameterShapes(CONFIG).map(([n]) => n);
            names.forEach((n, i) => assertRelClose(chunked.grads[i], ref.grads[n], 1e-4, `grad ${n} vs float64`));
          }
        }
        // Compact features train as the full-vocabulary logits they stand for.
        const [viaLogits, viaHidden] = [
          await trainStep(gpu, seed, { head: 7, mlp: 5, compact: false, recompute: false }),
          await trainStep(gpu, seed, { head: 7, mlp: 5, compact: true, recompute: false }),
        ];
        assertRelClose(viaHidden.losses, viaLogits.losses, 1e-5, 'compact against logits features: losses');
        assertRelClose(viaHidden.metricSums, viaLogits.metricSums, 1e-5, 'compact against logits features: metric sums');
        note('losses', Array.from(viaHidden.losses, (l) => l.toFixed(6)).join(' '));
      } finally {
        gpu.destroy();
      }
    },
  );
});
