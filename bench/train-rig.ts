/**
 * A training step through the real EAGLE3 path, for benchmarks: Eagle3DraftModel +
 * Eagle3TrainStrategy + AdamWBackend (SpecForge's optimizer defaults) + TrainerCore, one optimizer
 * step per micro-batch, random weights and random features (throughput does not depend on values).
 * bench/train.ts, bench/step-roofline.ts and bench/step-profile.ts all build their step here, so
 * the benchmarks time one construction.
 */
import { makeTrainBatch, type TrainBatch } from '../src/contracts/index.ts';
import { castF32ToF16Ref } from '../src/reference/cast.ts';
import { EMBED_NAME, eagle3ParameterShapes, type Eagle3Config } from '../src/config/eagle3-config.ts';
import type { Gpu } from '../src/gpu/gpu.ts';
import type { Tensor } from '../src/gpu/tensor.ts';
import { Eagle3DraftModel } from '../src/model/eagle3/model.ts';
import { AdamWBackend, SPECFORGE_OPTIMIZER } from '../src/optim/adamw-backend.ts';
import { Eagle3TrainStrategy } from '../src/training/strategies/eagle3.ts';
import { TrainerCore } from '../src/training/loop/trainer-core.ts';
import { Rng } from '../src/util/random.ts';

/** Tokens of one micro-batch and the TTT unroll length. */
export interface StepShape {
  batch: number;
  seq: number;
  ttt: number;
}

export interface TimedStep {
  /** Wall seconds until the GPU has finished the step. */
  seconds: number;
  /**
   * Wall seconds until the host had encoded the whole step (the trainer returned, before the final
   * wait); the batches submitted on the way (every 64 dispatches) run meanwhile.
   */
  encodeSeconds: number;
  /** Dispatches the step encoded (CommandBatcher stats). */
  dispatches: number;
  loss: number;
  gradNorm: number;
}

export interface TrainRig {
  step(): Promise<TimedStep>;
  /** The optimizer step alone (global norm + clip + AdamW + zero grads), on whatever grads are left. */
  optimizerStep(): Promise<void>;
  destroy(): void;
}

export interface TrainRigOptions {
  /** Seed of the random weights and batch (default 7). */
  seed?: number;
  /**
   * Storage precision of the batch's features (default f32): f16 as the feature store can hold
   * them, widened to f32 on the GPU by the strategy right before the draft forward.
   */
  featurePrecision?: 'f32' | 'f16';
  /** Activation recompute in the backward (model/eagle3/step-body.ts). */
  recompute?: boolean;
}

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/**
 * Build a draft with random weights (Hugging Face init scale: std 0.02, uniform; norms 1; the
 * vocabulary mapping keeps the first D target ids, any ascending choice costs the same), its
 * optimizer and trainer, and one random batch that every step reuses.
 */
export async function buildTrainRig(gpu: Gpu, config: Eagle3Config, shape: StepShape, options: TrainRigOptions = {}): Promise<TrainRig> {
  const { batch: B, seq: S, ttt: L } = shape;
  const R = B * S;
  const featurePrecision = options.featurePrecision ?? 'f32';
  const rng = new Rng(options.seed ?? 7);
  const std002 = 0.02 * Math.sqrt(3);
  const values: Record<string, Float32Array> = { [EMBED_NAME]: rng.floats(config.vocabSize * config.hiddenSize, std002) };
  for (const [name, s] of eagle3ParameterShapes(config))
    values[name] = s.length === 1 ? new Float32Array(s[0]).fill(1) : rng.floats(numel(s), std002);
  const t2d = new Int32Array(config.vocabSize).fill(0, config.draftVocabSize).fill(1, 0, config.draftVocabSize);
  const d2t = new Int32Array(config.draftVocabSize);

  const backend = new AdamWBackend(gpu, { ...SPECFORGE_OPTIMIZER, schedule: { ...SPECFORGE_OPTIMIZER.schedule, totalSteps: 1000 } });
  const model = new Eagle3DraftModel(gpu, backend, config, values, { t2d, d2t });
  for (const name of Object.keys(values)) delete values[name]; // the GPU holds them now
  // The strategy gets the Gpu so it can widen f16 features; f32 features pass through untouched.
  const core = new TrainerCore(new Eagle3TrainStrategy(model, { tttLength: L, gpu, recompute: options.recompute ?? false }), backend, 1);

  /** A random feature tensor in the chosen storage precision (the draws are the same in both). */
  const feature = (shape: number[], scale: number, label: string): Tensor => {
    const values = rng.floats(numel(shape), scale);
    return featurePrecision === 'f32'
      ? gpu.upload(shape, 'f32', values, label)
      : gpu.upload(shape, 'f16', castF32ToF16Ref(values).bits, label);
  };

  const ids = Int32Array.from({ length: R }, () => rng.int(0, config.vocabSize));
  const batch: TrainBatch<Tensor> = makeTrainBatch({
    sampleIds: Array.from({ length: B }, (_, b) => `bench-${b}`),
    strategy: 'eagle3',
    tensors: {
      input_ids: gpu.upload([B, S], 'i32', ids, 'input_ids'),
      attention_mask: gpu.upload([B, S], 'i32', new Int32Array(R).fill(1), 'attention_mask'),
      loss_mask: gpu.upload([B, S], 'i32', new Int32Array(R).fill(1), 'loss_mask'),
      hidden_state: feature([B, S, 3 * config.targetHiddenSize], 1, 'hidden_state'),
      target: feature([B, S, config.vocabSize], 4, 'target'),
    },
    metadata: { targetRepr: 'logits', tttLength: L },
  });
  await gpu.sync();

  return {
    async step() {
      const before = gpu.batcher.stats.dispatches;
      const start = performance.now();
      const r = await core.trainStep(batch);
      const encodeSeconds = (performance.now() - start) / 1000;
      await gpu.sync();
      const seconds = (performance.now() - start) / 1000;
      const dispatches = gpu.batcher.stats.dispatches - before;
      const [loss, gradNorm] = await Promise.all([r.loss, r.gradNorm ?? Promise.resolve(Number.NaN)]);
      return { seconds, encodeSeconds, dispatches, loss, gradNorm };
    },
    async optimizerStep() {
      await backend.optimizerStep();
      await gpu.sync();
    },
    destroy() {
      gpu.release(...Object.values(batch.tensors));
      model.destroy();
      backend.destroy();
    },
  };
}
