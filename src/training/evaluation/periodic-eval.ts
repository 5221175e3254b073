/**
 * Evaluation while training (`speclab train --eval-every N`, SpecForge's eval interval): the draft is
 * scored on held-out sequences every N optimizer steps and at the last one, forward only, reduced as
 * SpecForge's evaluator does (sums before ratios; src/training/evaluation/held-out-eval.ts). The held-out
 * features are captured once, when the session opens, and stay on the GPU until it is destroyed.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { ProgressDisplay } from '../../ports/progress.ts';
import type { CaptureConfig } from '../../inference/capture.ts';
import type { FeatureSource } from '../../inference/rollout-worker.ts';
import type { TrainSequence } from '../sequences/eagle3-data.ts';
import { captureHeldOutBatches, HeldOutEvaluator, type EvalMetrics, type HeldOutBatches } from './held-out-eval.ts';
import type { DraftTrainStrategy } from '../loop/strategy.ts';

export interface PeriodicEvalSettings {
  /** Held-out sequences (prompt + reply, loss on the reply), never trained on. */
  readonly sequences: readonly TrainSequence[];
  /** Evaluate every this many optimizer steps (and at the last). */
  readonly every: number;
}

export class PeriodicEvaluation {
  private constructor(
    private readonly gpu: Gpu,
    private readonly every: number,
    private readonly heldOut: HeldOutBatches,
    private readonly evaluator: HeldOutEvaluator,
  ) {}

  static async open(
    gpu: Gpu,
    source: FeatureSource,
    capture: CaptureConfig,
    strategy: DraftTrainStrategy,
    o: { batchSize: number; tttLength: number },
    settings: PeriodicEvalSettings,
    progress?: ProgressDisplay,
  ): Promise<PeriodicEvaluation> {
    if (!Number.isInteger(settings.every) || settings.every < 1)
      throw new RangeError(`evaluation: every must be a positive integer, got ${settings.every}`);
    if (settings.sequences.length === 0) throw new Error('evaluation: no held-out sequences');
    const bar = progress?.start({ label: 'capturing held-out features', total: settings.sequences.length, unit: 'sequences' });
    let heldOut: HeldOutBatches;
    try {
      heldOut = await captureHeldOutBatches({
        gpu,
        source,
        capture,
        sequences: settings.sequences,
        batchSize: o.batchSize,
        tttLength: o.tttLength,
        onProgress: (done) => bar?.update(done),
      });
    } finally {
      bar?.end();
    }
    return new PeriodicEvaluation(gpu, settings.every, heldOut, new HeldOutEvaluator(strategy, heldOut.batches));
  }

  /** The held-out metrics after optimizer step `step` when it is due, else undefined. */
  async at(step: number, totalSteps: number): Promise<EvalMetrics | undefined> {
    if (step % this.every !== 0 && step !== totalSteps) return undefined;
    // Held-out batches have their own lengths: the training step's free buffers go before, their scratch after.
    this.gpu.trimPool();
    try {
      return await this.evaluator.run();
    } finally {
      this.gpu.trimPool();
    }
  }

  /** The resident held-out batches (read by the lab's draft insight; never released here but in destroy). */
  get batches(): HeldOutBatches['batches'] {
    return this.heldOut.batches;
  }

  destroy(): void {
    this.heldOut.destroy();
  }
}
