/**
 * TrainerController (docs/training.md §3, with the fixes of SpecForge's later runtime): the consumer loop. It drives the loader,
 * counts optimizer steps, and at every optimizer boundary runs `beforeAck` (e.g. a checkpoint, so the
 * durable ack step and the checkpoint step agree) and then `ackFn` with exactly the sample ids that
 * step consumed. A stream that ends inside an accumulation window raises: acking part of a window
 * would claim samples the optimizer never applied. The controller never calls it; it calls in.
 */
import type { TrainBatch } from '../../contracts/index.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import type { TrainerCore } from './trainer-core.ts';

export interface BatchSource extends AsyncIterable<TrainBatch<Tensor>> {
  setEpoch?(epoch: number): void;
}

export interface StepLog {
  epoch: number;
  globalStep: number;
  microStep: number;
  loss: number;
  gradNorm: number;
  lr: number;
  samples: number;
  metrics: Record<string, number>;
}

export interface FitOptions {
  numEpochs?: number;
  maxSteps?: number;
  /** Called at the optimizer boundary before the ack (checkpoint here). */
  beforeAck?: (globalStep: number) => Promise<void>;
  /** Durable ack of the ids the step consumed: bind to TrainLease.ack / controller.ackTrainRefs. */
  ackFn?: (sampleIds: string[], globalStep: number, batches: TrainBatch<Tensor>[]) => Promise<void>;
  /** One record per optimizer step, with losses and metrics summed over its micro-batches. */
  onStep?: (log: StepLog) => void;
  startStep?: number;
  startEpoch?: number;
}

function handled<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

export class IncompleteAccumulationError extends Error {
  override name = 'IncompleteAccumulationError';
}

export interface FitResult {
  globalStep: number;
  microStep: number;
  losses: number[];
}

export class TrainerController {
  globalStep = 0;
  epoch = 0;
  /** The tensor shapes of the last micro-batch trained (batchShapeKey). */
  private lastShape: string | undefined;

  constructor(
    private readonly gpu: Gpu,
    private readonly core: TrainerCore,
  ) {}

  async fit(data: BatchSource, options: FitOptions = {}): Promise<FitResult> {
    this.globalStep = options.startStep ?? this.globalStep;
    const losses: number[] = [];
    const numEpochs = options.numEpochs ?? 1;
    for (this.epoch = options.startEpoch ?? 0; this.epoch < numEpochs; this.epoch++) {
      data.setEpoch?.(this.epoch);
      let windowIds: string[] = [];
      let windowBatches: TrainBatch<Tensor>[] = [];
      let windowLoss: Promise<number>[] = [];
      let windowMetrics: Promise<Record<string, number>>[] = [];
      for await (const batch of data) {
        windowIds.push(...batch.sampleIds);
        windowBatches.push(batch);
        // A batch of the last one's shapes reuses the last step's free buffers (and the bind groups
        // cached on them); before a batch of other shapes they go, so no step holds two working sets.
        const shape = batchShapeKey(batch);
        if (this.lastShape !== undefined && shape !== this.lastShape) this.gpu.trimPool();
        this.lastShape = shape;
        const result = await this.core.trainStep(batch);
        // A window cut short by an error is never awaited: mark its reads handled so a read that
        // fails later (device destroyed at exit) is not an unhandled rejection.
        windowLoss.push(handled(result.loss));
        windowMetrics.push(handled(result.metrics));
        if (!result.optimizerStepped) continue;
        this.globalStep++;
        if (options.beforeAck) await options.beforeAck(this.globalStep);
        // The step is reported before its ack makes it durable, so a log written from onStep holds
        // every durable step even when the process dies right after the ack.
        const lossValues = await Promise.all(windowLoss);
        const loss = lossValues.reduce((a, b) => a + b, 0) / lossValues.length;
        losses.push(loss);
        const metrics: Record<string, number> = {};
        for (const m of await Promise.all(windowMetrics)) for (const [k, v] of Object.entries(m)) metrics[k] = (metrics[k] ?? 0) + v;
        const gradNorm = await (result.gradNorm ?? Promise.resolve(Number.NaN));
        // The GPU skipped an update with a non-finite norm; bias correction must not count it.
        if (result.gradNorm && !Number.isFinite(gradNorm)) this.core.backend.markSkipped(this.core.backend.step);
        options.onStep?.({
          epoch: this.epoch,
          globalStep: this.globalStep,
          microStep: this.core.microStep,
          loss,
          gradNorm,
          lr: result.lr ?? Number.NaN,
          samples: windowIds.length,
          metrics,
        });
        if (options.ackFn) await options.ackFn(windowIds, this.globalStep, windowBatches);
        for (const b of windowBatches) this.gpu.release(...Object.values(b.tensors));
        windowIds = [];
        windowBatches = [];
        windowLoss = [];
        windowMetrics = [];
        if (options.maxSteps !== undefined && this.globalStep >= options.maxSteps) {
          return { globalStep: this.globalStep, microStep: this.core.microStep, losses };
        }
      }
      if (windowIds.length > 0) {
        for (const b of windowBatches) this.gpu.release(...Object.values(b.tensors));
        this.core.backend.zeroGrad();
        throw new IncompleteAccumulationError(
          `epoch ${this.epoch} ended inside an accumulation window: ${windowBatches.length} of ${this.core.accumulationSteps} micro-batches (samples ${windowIds.join(', ')}) were backpropagated but never stepped; they are not acked and will be replayed`,
        );
      }
    }
    return { globalStep: this.globalStep, microStep: this.core.microStep, losses };
  }
}

/** The names and shapes of a batch's tensors, as one string. */
export function batchShapeKey(batch: TrainBatch<Tensor>): string {
  return Object.entries(batch.tensors)
    .map(([name, t]) => `${name}:${t.shape.join('x')}:${t.dtype}`)
    .sort()
    .join(' ');
}
