/**
 * Test data: random EAGLE3 problems (weights, batch, vocabulary mapping) for the GPU draft against
 * the float64 reference, shared by test/model/eagle3.test.ts, the split-tensor test
 * test/model/eagle3-split.test.ts and the recompute test test/model/eagle3-step-body.test.ts, and their upload. Each suite picks its own batch layout; the
 * draws from the seed are the same for a given layout, so a suite's problem does not change when
 * another suite changes its layout.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import type { Eagle3Inputs } from '../../src/model/eagle3/inputs.ts';
import type { Eagle3TrainOutput } from '../../src/model/eagle3/model.ts';
import type { AdamWBackend } from '../../src/optim/adamw-backend.ts';
import { EMBED_NAME, eagle3ParameterShapes, type Eagle3Config } from '../../src/config/eagle3-config.ts';
import type { Eagle3RefInputs } from '../../src/reference/eagle3.ts';
import { Rng } from '../../src/util/random.ts';

/**
 * A small draft whose weight matrices are wider than a short batch's activations, so a binding limit
 * can split the former only (test/model/eagle3-split.test.ts, test/model/eagle3-step-body.test.ts).
 */
export const SPLITTABLE_DRAFT: Eagle3Config = {
  hiddenSize: 64,
  intermediateSize: 128,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  vocabSize: 256,
  draftVocabSize: 128,
  targetHiddenSize: 96,
  rmsNormEps: 1e-5,
  ropeTheta: 500000,
  maxPositionEmbeddings: 64,
};

/** The batch layout of a random problem: 3 TTT steps over `lengths.length` padded sequences of seqLen. */
export interface RandomProblemLayout {
  seqLen: number;
  /** Unpadded length of each sequence (the batch is lengths.length). */
  lengths: readonly number[];
  /** Draft id i maps to target id 2·i + usedOffset. */
  usedOffset: number;
  /** First position of each sequence the loss counts (the last one never counts). */
  lossStart: number;
}

export interface RandomProblem {
  /** Parameter values by SpecForge name, embedding included; norms near 1, matrices ±0.3. */
  values: Record<string, Float32Array>;
  inputs: Eagle3RefInputs;
}

export function randomEagle3Problem(c: Eagle3Config, seed: number, layout: RandomProblemLayout): RandomProblem {
  const rng = new Rng(seed);
  const { seqLen: S, lengths, usedOffset, lossStart } = layout;
  const B = lengths.length;
  const values: Record<string, Float32Array> = { [EMBED_NAME]: rng.floats(c.vocabSize * c.hiddenSize, 1) };
  for (const [name, shape] of eagle3ParameterShapes(c)) {
    const n = shape.reduce((a, b) => a * b, 1);
    values[name] = shape.length === 1 ? Float32Array.from({ length: n }, () => 1 + rng.uniform(-0.2, 0.2)) : rng.floats(n, 0.3);
  }
  const used = Array.from({ length: c.draftVocabSize }, (_, i) => 2 * i + usedOffset);
  const t2d = new Int32Array(c.vocabSize);
  for (const u of used) t2d[u] = 1;
  const attentionMask = Int32Array.from({ length: B * S }, (_, r) => (r % S < lengths[Math.floor(r / S)] ? 1 : 0));
  const lossMask = Int32Array.from(attentionMask, (m, r) => (r % S >= lossStart && r % S < lengths[Math.floor(r / S)] - 1 ? m : 0));
  const target = rng.floats(B * S * c.vocabSize, 4);
  // A clear draft-vocabulary winner in two rows of three, so accuracy and acceptance are not noise.
  for (let r = 0; r < B * S; r++) if (r % 3 !== 0) target[r * c.vocabSize + used[(r * 7) % used.length]] += 5;
  const inputs: Eagle3RefInputs = {
    batch: B,
    seqLen: S,
    tttLength: 3,
    inputIds: Int32Array.from({ length: B * S }, () => rng.int(0, c.vocabSize)),
    attentionMask,
    lossMask,
    hiddenStates: rng.floats(B * S * 3 * c.targetHiddenSize, 1),
    target,
    t2d,
    d2t: Int32Array.from(used, (u, i) => u - i),
  };
  return { values, inputs };
}

/** Upload a random problem's batch (ids and masks as i32 [B, S]); release with releaseInputs. */
export function uploadRandomInputs(gpu: Gpu, c: Eagle3Config, x: Eagle3RefInputs): Eagle3Inputs {
  const { batch: B, seqLen: S } = x;
  return {
    inputIds: gpu.upload([B, S], 'i32', x.inputIds, 'input_ids'),
    attentionMask: gpu.upload([B, S], 'i32', x.attentionMask, 'attention_mask'),
    lossMask: gpu.upload([B, S], 'i32', x.lossMask, 'loss_mask'),
    hiddenStates: gpu.upload([B, S, 3 * c.targetHiddenSize], 'f32', x.hiddenStates, 'hidden_state'),
    target: gpu.upload([B, S, c.vocabSize], 'f32', x.target, 'target'),
  };
}

/** What one training step leaves, read back (test/model/eagle3-step-body.test.ts, eagle3-row-chunks.test.ts). */
export interface TrainedStep {
  losses: Float32Array;
  metricSums: Float32Array;
  grads: Float32Array[];
  gradNorm: number;
  /** Every parameter after one AdamW step. */
  updated: Float32Array[];
}

/** Reads `out`'s losses and metric sums and every gradient, runs one AdamW step, and reads every parameter after it. */
export async function readTrainedStep(gpu: Gpu, backend: AdamWBackend, c: Eagle3Config, out: Eagle3TrainOutput): Promise<TrainedStep> {
  const names = eagle3ParameterShapes(c).map(([n]) => n);
  const gradReads = names.map((n) => gpu.readLater(backend.param(n).grad) as Promise<Float32Array>);
  const report = await backend.optimizerStep();
  const valueReads = names.map((n) => gpu.readLater(backend.param(n).value) as Promise<Float32Array>);
  return {
    losses: await out.losses,
    metricSums: await out.metricSums,
    grads: await Promise.all(gradReads),
    gradNorm: await report.gradNorm,
    updated: await Promise.all(valueReads),
  };
}
