/**
 * The seam between the branch-free trainer and a draft family (docs/training.md §1, §4).
 *
 * WebGPU has no autograd, so a strategy runs the forward, the loss AND the hand-written backward of
 * one micro-batch, adding its gradients (already multiplied by `lossScale`, i.e. 1/accumulation)
 * into the backend's gradient buffers. Losses and metrics come back as pending reads so the step
 * never waits on the GPU; metrics are sums and counts, reduced as numerator/denominator pairs.
 */
import type { TrainBatch } from '../../contracts/index.ts';
import type { Tensor } from '../../gpu/tensor.ts';

export interface StepOutput {
  /** Total (weighted) loss of the micro-batch, unscaled. */
  loss: Promise<number>;
  /** Metric sums and counts (e.g. `correct_0`, `denom_0`), to be added across micro-batches. */
  metrics: Promise<Record<string, number>>;
}

export interface DraftTrainStrategy {
  readonly name: string;
  readonly requiredFeatures: readonly string[];
  /** Throws naming the first missing or malformed feature. */
  validateBatch(batch: TrainBatch<Tensor>): void;
  forwardBackward(batch: TrainBatch<Tensor>, lossScale: number): Promise<StepOutput>;
  /**
   * The forward of `forwardBackward` with its loss and metrics and no backward (SpecForge's eval
   * forward under no_grad): the same loss and metric sums for the same batch and weights, and no
   * gradient buffer or weight is written. Optional: a strategy without it cannot be evaluated on
   * held-out data (src/training/evaluation/held-out-eval.ts).
   */
  evaluate?(batch: TrainBatch<Tensor>): Promise<StepOutput>;
}

export class MissingFeatureError extends Error {
  override name = 'MissingFeatureError';
}

export function requireFeatures(strategy: string, batch: TrainBatch<Tensor>, names: readonly string[]): void {
  for (const name of names) {
    if (!(name in batch.tensors)) {
      throw new MissingFeatureError(
        `${strategy}: batch [${batch.sampleIds.join(', ')}] lacks feature "${name}" (has ${Object.keys(batch.tensors).join(', ')})`,
      );
    }
  }
}
