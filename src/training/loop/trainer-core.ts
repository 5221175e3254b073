/**
 * TrainerCore (docs/training.md §2, as in SpecForge's later runtime): one branch-free micro-step. The accumulation boundary is
 * decided before the backward; the strategy adds gradients scaled by 1/accumulation; at the boundary
 * the backend clips and steps. The core never looks at online/offline or the target representation.
 */
import type { TrainBatch } from '../../contracts/index.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import type { AdamWBackend } from '../../optim/adamw-backend.ts';
import type { DraftTrainStrategy, StepOutput } from './strategy.ts';

export interface StepResult extends StepOutput {
  optimizerStepped: boolean;
  /** Present at the boundary: pre-clip global gradient norm. */
  gradNorm?: Promise<number>;
  lr?: number;
}

export class TrainerCore {
  /** Micro-batches seen, across epochs (persisted in checkpoints). */
  microStep = 0;

  constructor(
    readonly strategy: DraftTrainStrategy,
    readonly backend: AdamWBackend,
    readonly accumulationSteps = 1,
  ) {
    if (!(Number.isInteger(accumulationSteps) && accumulationSteps >= 1)) {
      throw new RangeError(`TrainerCore: accumulationSteps must be a positive integer, got ${accumulationSteps}`);
    }
  }

  /** Micro-batches of the current accumulation window already backpropagated. */
  get accumulationRemainder(): number {
    return this.microStep % this.accumulationSteps;
  }

  async trainStep(batch: TrainBatch<Tensor>): Promise<StepResult> {
    this.strategy.validateBatch(batch);
    const boundary = (this.microStep + 1) % this.accumulationSteps === 0;
    const out = await this.strategy.forwardBackward(batch, 1 / this.accumulationSteps);
    this.microStep++;
    if (!boundary) return { ...out, optimizerStepped: false };
    const report = await this.backend.optimizerStep();
    return { ...out, optimizerStepped: true, gradNorm: report.gradNorm, lr: report.lr };
  }
}
