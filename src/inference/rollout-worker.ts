/**
 * RolloutWorker (docs/features.md §7): the producer loop. It leases prompts, asks its FeatureSource for
 * one feature set per task in one batched call, verifies every capture, puts tensors straight into
 * the feature store and commits only metadata refs. The controller never calls it.
 *
 * Failure rules — every leased task ends in exactly one controller action (commit or fail):
 *  - the source throws            → all tasks failed retryable (requeued, attempt + 1), rethrow;
 *  - the source returns n ≠ tasks → all failed terminally, ValueError-like RangeError;
 *  - a capture mismatch           → that task failed terminally; the good ones are still committed,
 *    (or, with f16 features, a     then the first mismatch is rethrown;
 *    value f16 cannot hold)
 *  - a put throws                 → abort the sample, fail the task retryable, continue.
 * Sample ids are deterministic (`<run_id>:<task_id>`), so a retried prompt re-puts the same id and a
 * duplicate commit is a no-op.
 */
import { onlineSampleId, type PromptTask, type SampleRef } from '../contracts/index.ts';
import type { RolloutControl } from '../control/rollout-control.ts';
import type { FeatureStore } from '../data/feature-store.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { CaptureMismatchError, toFeaturePrecision, verifyCapture, type CaptureConfig } from './capture.ts';

/** One task's captured features, plus the aux layer ids the source actually captured. */
export interface CapturedFeatures {
  tensors: Record<string, Tensor>;
  auxLayerIds?: readonly number[];
}

/** Produces features for prompt tasks (the target model in WGSL, or anything else that can). */
export interface FeatureSource {
  generateFeatures(tasks: readonly PromptTask[], capture: CaptureConfig): Promise<CapturedFeatures[]>;
}

/**
 * The controller endpoints a worker calls: a `DataFlowController` in this process, or one behind
 * the gateway's control RPC for a browser tab (src/training/cluster/tab-rollout.ts). The worker never
 * calls `completePromptTasks`, so the tab's endpoints need not offer it.
 */
export type RolloutEndpoints = Omit<RolloutControl, 'completePromptTasks'>;

export type WorkerState = 'starting' | 'ready' | 'paused' | 'draining' | 'unhealthy' | 'stopped';

export class RolloutWorker {
  state: WorkerState = 'starting';

  private constructor(
    private readonly controller: RolloutEndpoints,
    private readonly source: FeatureSource,
    private readonly store: FeatureStore,
    private readonly gpu: Gpu,
    private readonly capture: CaptureConfig,
    readonly workerId: string,
  ) {}

  /** Registers the worker with the controller (its member registry may be shared, hence async) and returns it. */
  static async create(
    controller: RolloutEndpoints,
    source: FeatureSource,
    store: FeatureStore,
    gpu: Gpu,
    capture: CaptureConfig,
    options: { workerId?: string; strategy?: string } = {},
  ): Promise<RolloutWorker> {
    const workerId = await controller.registerRolloutWorker({
      // No id given: the controller names the worker (an undefined field is no JSON value, and would be refused).
      ...(options.workerId !== undefined ? { workerId: options.workerId } : {}),
      strategy: options.strategy ?? 'eagle3',
      role: 'rollout',
    });
    return new RolloutWorker(controller, source, store, gpu, capture, workerId);
  }

  /** Why the latest put of this worker failed (retryable failures requeue the task and leave no record). */
  lastPutFailure: string | undefined;

  async runOnce(maxTasks: number): Promise<SampleRef[]> {
    if (this.state === 'stopped' || this.state === 'draining' || this.state === 'paused') return [];
    const tasks = await this.controller.leasePromptTasks(this.workerId, maxTasks);
    if (tasks.length === 0) return [];
    this.state = 'ready';
    const ids = tasks.map((t) => t.taskId);

    let captured: CapturedFeatures[];
    try {
      captured = await this.source.generateFeatures(tasks, this.capture);
    } catch (err) {
      await this.controller.failPromptTasks(this.workerId, ids, `feature source failed: ${(err as Error).message}`, true);
      this.state = 'unhealthy';
      throw err;
    }
    if (captured.length !== tasks.length) {
      for (const c of captured) this.gpu.release(...Object.values(c.tensors));
      await this.controller.failPromptTasks(
        this.workerId,
        ids,
        `feature source returned ${captured.length} results for ${tasks.length} tasks`,
        false,
      );
      this.state = 'unhealthy';
      throw new RangeError(`feature source returned ${captured.length} results for ${tasks.length} tasks`);
    }

    const refs: SampleRef[] = [];
    let firstMismatch: CaptureMismatchError | undefined;
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[i];
      const { auxLayerIds } = captured[i];
      let tensors = captured[i].tensors;
      const sampleId = onlineSampleId(this.controller.runId, task.taskId);
      try {
        verifyCapture(tensors, this.capture, { sampleId, recordedAuxLayerIds: auxLayerIds });
        // f16 features are cast (and an overflow refused, terminally) before the put.
        const precision = this.capture.featurePrecision ?? 'f32';
        if (precision !== 'f32') tensors = await toFeaturePrecision(this.gpu, tensors, precision, sampleId);
      } catch (err) {
        if (!(err instanceof CaptureMismatchError)) throw err;
        this.gpu.release(...Object.values(tensors));
        await this.controller.failPromptTasks(this.workerId, [task.taskId], err.message, false);
        firstMismatch ??= err;
        continue;
      }
      try {
        refs.push(
          await this.store.put(tensors, sampleId, {
            runId: this.controller.runId,
            sourceTaskId: task.taskId,
            targetRepr: this.capture.targetRepr,
            vocabMapVersion: this.capture.vocabMapVersion,
            numTokens: typeof task.metadata.num_tokens === 'number' ? task.metadata.num_tokens : (tensors.input_ids?.shape.at(-1) ?? 0),
            targetModelVersion: task.targetModelVersion,
            draftWeightVersion: task.draftWeightVersion,
            extra: { ttt_length: this.capture.extra?.ttt_length ?? 7 },
          }),
        );
      } catch (err) {
        this.store.abort(sampleId);
        this.gpu.release(...Object.values(tensors));
        // Retryable, so the task is requeued and no terminal failure records why: keep the cause here,
        // for the caller that finds the round short (a full disk must be named, not lost).
        this.lastPutFailure = `sample ${sampleId}: put failed: ${(err as Error).message}`;
        await this.controller.failPromptTasks(this.workerId, [task.taskId], `put failed: ${(err as Error).message}`, true);
      }
    }
    if (refs.length > 0) await this.controller.commitSamples(this.workerId, refs);
    if (firstMismatch) {
      this.state = 'unhealthy';
      throw firstMismatch;
    }
    return refs;
  }

  stop(): void {
    this.state = 'stopped';
  }
}

/**
 * Why a round ended with fewer samples committed than it has tasks: the terminal failures, and each
 * worker's latest failed put (retryable, so requeued and recorded nowhere else: a full disk is named here).
 */
export function shortRoundError(
  round: number,
  committed: number,
  total: number,
  failures: readonly { reason: string }[],
  workers: readonly RolloutWorker[],
): Error {
  const why = [...failures.map((f) => f.reason), ...workers.flatMap((w) => w.lastPutFailure ?? [])];
  return new Error(`round ${round}: ${committed} of ${total} samples committed (${why.join('; ') || 'no failure recorded'})`);
}
