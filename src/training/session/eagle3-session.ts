/**
 * Eagle3TrainingSession: one online EAGLE3 training run on a target model, driven one optimizer
 * step at a time, durable and resumable. `speclab train` (Node/Deno) and the browser lab's Web Worker
 * both run it; only the storage differs (files on disk; IndexedDB in a tab).
 *
 * Data plan (deterministic from the seed, so a resumed run trains on exactly the same stream):
 *   sequences   prompts continued greedily by the target (kept in `sequences.json`, regenerated
 *               identically when missing);
 *   stream      `epochs` seeded permutations of the sequences, cut into rounds of `roundPrompts`;
 *               task id `r<round>-<i>-s<sequence>`, sample id `<runId>:<task id>`.
 * One step: when the train queue is empty, the next round is ingested into the DataFlowController
 * and the rollout workers capture its features into the (spilling) LocalFeatureStore; then the
 * trainer leases one batch through the FeatureDataLoader and steps AdamW.
 *
 * Durability (docs/durability.md §9): every `checkpointEvery` steps, at the end of each round and at
 * `flush()`, the checkpoint of step N is written first and then the acks of every step since the last
 * one are recorded as ONE durable ack at step N. A crash between the two leaves the newer checkpoint
 * ahead of the ledger, and resume uses the previous one (two are kept). On open, a run with a durable
 * ack restores weights, moments and counters from the checkpoint of the acked step, and
 * `reconcileOnRestart` requeues every committed but unacked sample (its features come back from the
 * spill), so no sample is lost and none is trained twice after its ack. Every checkpoint is
 * self-contained (`eagle3RunExtras`: draft config, t2d/d2t, settings): it is exported alone.
 */
import { DataFlowController, type ControllerStatus } from '../../control/controller.ts';
import type { ReleasableFeatureStore } from '../../control/controller.ts';
import { onlineSampleId, type SampleRef } from '../../contracts/index.ts';
import { FeatureDataLoader } from '../../data/feature-dataloader.ts';
import type { FeatureStore, FeatureStoreHealth } from '../../data/feature-store.ts';
import { LocalFeatureStore } from '../../data/local-feature-store.ts';
import type { Eagle3DraftCheckpoint } from '../../inference/eagle3-drafter.ts';
import { RolloutWorker } from '../../inference/rollout-worker.ts';
import type { Eagle3Config } from '../../config/eagle3-config.ts';
import { withoutEmbedding } from '../../model/eagle3/export.ts';
import type { VocabMapping } from '../../model/eagle3/vocab-mapping.ts';
import { AdamWBackend } from '../../optim/adamw-backend.ts';
import { checkpointDue, eagle3StepMetrics, saveRunCheckpoint } from '../checkpoints/run-checkpoints.ts';
import { resumeFromCheckpoint } from '../checkpoints/checkpoint-resume.ts';
import { pruneCheckpoints, type RunContract } from '../checkpoints/train-checkpoint.ts';
import type { TrainSequence } from '../sequences/eagle3-data.ts';
import { PeriodicEvaluation } from '../evaluation/periodic-eval.ts';
import { checkRequeuedSpills } from '../checkpoints/resume-integrity.ts';
import { Eagle3TrainStrategy } from '../strategies/eagle3.ts';
import { TrainerController, type StepLog } from '../loop/trainer-controller.ts';
import { TrainerCore } from '../loop/trainer-core.ts';
import { waitForRoundCommits } from './cluster-round.ts';
import { StreamOrderLease } from './stream-order-lease.ts';
import type { DraftInsightParts } from '../evaluation/draft-insight.ts';

import {
  sessionSettingsSchema,
  type ResumeReport,
  type SessionCluster,
  type SessionEvent,
  type SessionInputs,
  type SessionSettings,
  type SessionStep,
  type SessionStorage,
} from './session-types.ts';

export {
  sessionSettingsSchema,
  type ResumeReport,
  type SessionCluster,
  type SessionEvent,
  type SessionInputs,
  type SessionSettings,
  type SessionStep,
  type SessionStorage,
};

import { buildSessionParts, type SessionLease, type SessionParts } from './session-parts.ts';

export { sessionCapture, sessionFeatureFields } from './session-parts.ts';

export class Eagle3TrainingSession {
  private readonly owned: { destroy(): void }[];
  private readonly evaluation?: PeriodicEvaluation;
  private readonly rounds: { taskId: string; sequence: number }[][];
  private nextRound = 0;
  private readonly prefetched = new Set<number>(); // cluster rounds ingested while the one before trained
  private untrained: { taskId: string; sequence: number }[][] | undefined; // resumed cluster run: unacked tasks per round
  private pendingAcks: SampleRef[] = [];
  private lastCheckpoint = 0;
  private tokensTrained = 0;
  /** Samples trained through the last optimizer step, over the whole stream (saved in checkpoints). */
  private samplesConsumed = 0;
  private readonly openedAt: number;
  private readonly avgLength: number;
  resumed: ResumeReport | undefined;
  private readonly inputs: SessionInputs;
  readonly sequences: readonly TrainSequence[];
  readonly mapping: VocabMapping;
  readonly coverage: number;
  readonly distinctTokens: number;
  readonly draftConfig: Eagle3Config;
  readonly auxLayerIds: readonly number[];
  readonly initialWeights: Readonly<Record<string, Float32Array>>;
  readonly totalSteps: number;
  readonly contract: RunContract;
  private readonly controller: DataFlowController;
  private readonly store: FeatureStore & ReleasableFeatureStore;
  private readonly workers: RolloutWorker[];
  private readonly backend: AdamWBackend;
  private readonly core: TrainerCore;
  private readonly trainer: TrainerController;
  private readonly loader: FeatureDataLoader;
  private readonly lease: SessionLease;
  private readonly extras: SessionParts['extras'];

  private constructor(parts: SessionParts) {
    ({
      inputs: this.inputs,
      sequences: this.sequences,
      mapping: this.mapping,
      coverage: this.coverage,
      distinctTokens: this.distinctTokens,
      draftConfig: this.draftConfig,
    } = parts);
    ({
      auxLayerIds: this.auxLayerIds,
      initialWeights: this.initialWeights,
      totalSteps: this.totalSteps,
      contract: this.contract,
      rounds: this.rounds,
      owned: this.owned,
      extras: this.extras,
    } = parts);
    ({
      controller: this.controller,
      store: this.store,
      workers: this.workers,
      backend: this.backend,
      core: this.core,
      trainer: this.trainer,
      loader: this.loader,
      lease: this.lease,
      evaluation: this.evaluation,
    } = parts);
    this.openedAt = parts.inputs.now();
    this.avgLength = parts.sequences.reduce((a, s) => a + s.inputIds.length, 0) / Math.max(parts.sequences.length, 1);
  }

  /** Builds the run (generating or reading its sequences) and resumes it when its ledger has acks. */
  static async open(inputs: SessionInputs): Promise<Eagle3TrainingSession> {
    const session = new Eagle3TrainingSession(await buildSessionParts(inputs));
    try {
      await session.resume();
    } catch (err) {
      session.destroy();
      throw err;
    }
    return session;
  }

  get globalStep(): number {
    return this.trainer.globalStep;
  }

  get finished(): boolean {
    return this.trainer.globalStep >= this.totalSteps;
  }

  get runId(): string {
    return this.inputs.runId;
  }

  /** Restores a run whose ledger has a durable ack; a fresh ledger leaves everything as built. */
  private async resume(): Promise<void> {
    const { storage, runId } = this.inputs;
    const marker = await storage.metadata.durableMarker();
    const restored = await resumeFromCheckpoint(storage.checkpoints, this.inputs.gpu, this.backend, {
      runId,
      marker,
      contract: this.contract,
    });
    // A shared queue outlives this trainer: leases a dead predecessor held would keep its refs out of
    // the requeue, so the queue is rebuilt from the ledger (one trainer per run).
    if (this.inputs.cluster) await this.controller.queue.clear();
    // Read BEFORE the requeue: in a cluster run workers may commit meanwhile, and a sample committed
    // between the two reads must stay in the plan (its task is redone and deduplicated), never be
    // counted as committed without having been requeued.
    const committed = new Set(await storage.metadata.allCommittedIds());
    const report = await this.controller.reconcileOnRestart(this.store);
    // A shared (data-plane) store keeps requeued features itself; only a spilling local store is checked here.
    if (this.store instanceof LocalFeatureStore)
      await checkRequeuedSpills(this.inputs.runId, this.store, this.inputs.storage, report.requeued);
    if (restored) {
      this.trainer.globalStep = restored.state.globalStep;
      this.core.microStep = restored.state.microStep;
      this.samplesConsumed = restored.state.data.samplesConsumed;
      this.lastCheckpoint = restored.state.globalStep;
      this.resumed = { step: restored.state.globalStep, requeued: report.requeued.length, released: report.released.length };
      this.inputs.onEvent?.({
        kind: 'phase',
        phase: 'resume',
        detail: `step ${restored.state.globalStep}: ${report.released.length} samples already trained, ${report.requeued.length} committed samples requeued`,
      });
    }
    // Read the ledger once: rounds whose every task is committed are done, and a partly committed round
    // keeps only the rest (rounds after it were never started, so the plan needs no further lookups).
    if (committed.size === 0) return;
    if (this.inputs.cluster) {
      // The requeue put back the committed, unacked refs of rounds committed in part too (captured ahead,
      // cut by the crash): trained now, they would break stream order. Each round enqueues its own in its turn.
      await this.controller.queue.clear();
      const acked = marker.acked;
      this.untrained = this.rounds.map((round) => round.filter((t) => !acked.has(onlineSampleId(runId, t.taskId))));
    }
    for (const [r, round] of this.rounds.entries()) this.rounds[r] = round.filter((t) => !committed.has(onlineSampleId(runId, t.taskId)));
    const left = this.untrained ?? this.rounds;
    while (this.nextRound < this.rounds.length && left[this.nextRound].length === 0) this.nextRound++;
  }

  /** Ingests round `r` (its tasks not committed before this open) and lets the rollout workers capture it. */
  private async rollout(r: number): Promise<void> {
    const t0 = this.inputs.now();
    const pending = this.rounds[r];
    // (Ingest again would bring back a prefetched round's done tasks: the ledger drops their records.)
    if (!this.prefetched.has(r) && pending.length > 0) await this.ingest(pending);
    if (this.inputs.cluster) {
      const round = this.untrained?.[r] ?? pending;
      const sampleIds = round.map((t) => onlineSampleId(this.inputs.runId, t.taskId));
      const onProgress = (done: number, total: number) =>
        this.inputs.onEvent?.({
          kind: 'phase',
          phase: 'rollout',
          detail: `round ${r}: ${done} of ${total} samples committed by rollout workers`,
        });
      await waitForRoundCommits(
        r,
        sampleIds,
        round.map((t) => t.taskId),
        this.controller,
        this.inputs.storage.metadata,
        { ...this.inputs.cluster, now: this.inputs.now, onProgress },
      );
      // Rollout workers only commit (enqueueCommits false): the round is enqueued here, from the ledger,
      // once all of it is committed, so it is complete before training and a late enqueue cannot race an ack.
      const trained = new Set([
        ...(await this.inputs.storage.metadata.durableMarker()).acked,
        ...this.pendingAcks.map((ref) => ref.sampleId),
      ]);
      const refs = await this.inputs.storage.metadata.getCommittedMany(sampleIds.filter((id) => !trained.has(id)));
      await this.controller.queue.put(refs.filter((ref) => ref !== undefined));
      // The workers capture the next round while this one trains (enqueued in its turn: the same stream).
      if (r + 1 < this.rounds.length) {
        await this.ingest(this.rounds[r + 1]);
        this.prefetched.add(r + 1);
      }
      this.inputs.onEvent?.({ kind: 'rollout', round: r, samples: round.length, seconds: (this.inputs.now() - t0) / 1000 });
      return;
    }
    // Workers lease in turn (one command stream: their GPU work is serialised anyway), so the commit
    // order, and with it the batch order, does not depend on timing.
    const share = Math.ceil(pending.length / this.workers.length);
    let committed = 0;
    for (let progress = true; progress;) {
      progress = false;
      for (const w of this.workers) {
        const refs = await w.runOnce(share);
        committed += refs.length;
        progress ||= refs.length > 0;
      }
    }
    if (committed !== pending.length)
      throw new Error(
        `round ${r}: ${committed} of ${pending.length} samples committed (${(await this.controller.promptFailures()).map((f) => f.reason).join('; ')})`,
      );
    this.inputs.onEvent?.({ kind: 'rollout', round: r, samples: committed, seconds: (this.inputs.now() - t0) / 1000 });
  }

  private async ingest(tasks: readonly { taskId: string; sequence: number }[]): Promise<void> {
    await this.controller.ingestPrompts(
      tasks.map((t) => {
        const s = this.sequences[t.sequence];
        return { taskId: t.taskId, payload: { input_ids: s.inputIds, loss_mask: s.lossMask }, maxLength: s.inputIds.length };
      }),
    );
  }

  /** One optimizer step (rolling out the next round first when the queue is empty); undefined when the run is complete. */
  async step(): Promise<SessionStep | undefined> {
    while ((await this.queued()) === 0) {
      if (this.nextRound >= this.rounds.length) {
        await this.flush();
        return undefined;
      }
      await this.rollout(this.nextRound++);
    }
    const settings = this.inputs.settings;
    let log: StepLog | undefined;
    let result: SessionStep | undefined;
    await this.trainer.fit(this.loader, {
      maxSteps: this.trainer.globalStep + 1,
      onStep: (s) => (log = s),
      ackFn: async (_ids, step, batches) => {
        const refs = batches.flatMap((b) => b.refs);
        this.pendingAcks.push(...refs);
        this.samplesConsumed += refs.length;
        const roundEnd = (await this.queued()) === 0;
        const checkpointed = checkpointDue(step, settings.checkpointEvery, this.totalSteps) || roundEnd;
        result = { ...this.describe(log!, checkpointed), eval: await this.evaluation?.at(step, this.totalSteps) };
        await this.inputs.onStep?.(result);
        if (checkpointed) await this.flush();
      },
    });
    if (!result)
      throw new Error(`step ${this.trainer.globalStep + 1}: the loader yielded no batch although ${await this.queued()} refs are queued`);
    return result;
  }

  /** Refs waiting to be trained: in the queue, or leased by the stream-order lease and not yet handed out. */
  private async queued(): Promise<number> {
    return (await this.controller.queue.depth()) + (this.lease instanceof StreamOrderLease ? this.lease.held : 0);
  }

  /** A trainer step as the session reports it: per-TTT-step losses and accuracies, rates. */
  private describe(log: StepLog, checkpointed: boolean): SessionStep {
    this.tokensTrained += log.samples * this.avgLength;
    const elapsed = (this.inputs.now() - this.openedAt) / 1000;
    return {
      ...log,
      totalSteps: this.totalSteps,
      ...eagle3StepMetrics(log.metrics, this.inputs.settings.tttLength),
      tokensPerSecond: this.tokensTrained / elapsed,
      checkpointed,
    };
  }

  /** Checkpoint the current step and durably ack every sample trained since the last checkpoint. */
  async flush(): Promise<void> {
    const step = this.trainer.globalStep;
    if (this.pendingAcks.length === 0 && step === this.lastCheckpoint) return;
    const { storage, runId, gpu } = this.inputs;
    // Resume reads the data position from the ledger; the checkpoint keeps it for the record.
    await saveRunCheckpoint(storage.checkpoints, gpu, this.backend, {
      runId,
      globalStep: step,
      microStep: this.core.microStep,
      samplesConsumed: this.samplesConsumed,
      contract: this.contract,
      extras: this.extras,
    });
    const acked = this.pendingAcks;
    this.pendingAcks = [];
    if (acked.length > 0) await this.lease.ack(acked, { globalStep: step, optimizerDurable: true });
    const previous = this.lastCheckpoint;
    this.lastCheckpoint = step;
    await pruneCheckpoints(storage.checkpoints, runId, previous);
    this.inputs.onEvent?.({ kind: 'checkpoint', step, acked: acked.length });
  }

  /** The draft as it stands (weights read back from the GPU), ready for speculative decoding. */
  async currentDraft(): Promise<Eagle3DraftCheckpoint> {
    return { config: this.draftConfig, weights: await this.currentWeights(), d2t: this.mapping.d2t, auxLayerIds: this.auxLayerIds };
  }

  /** The untrained draft (this run's initial weights). */
  initialDraft(): Eagle3DraftCheckpoint {
    return {
      config: this.draftConfig,
      weights: withoutEmbedding(this.initialWeights),
      d2t: this.mapping.d2t,
      auxLayerIds: this.auxLayerIds,
    };
  }

  /** Trained parameters by name (the frozen embedding excluded). */
  async currentWeights(): Promise<Record<string, Float32Array>> {
    const weights: Record<string, Float32Array> = {};
    for (const p of this.backend.params) weights[p.name] = (await this.inputs.gpu.read(p.value)) as Float32Array;
    return weights;
  }

  /**
   * What a draft insight capture reads (src/training/evaluation/draft-insight.ts): the strategy's gradient-free
   * held-out forward, the resident held-out batches and the vocabulary map. Undefined without a
   * held-out evaluation (`inputs.evaluation`). A capture writes no training state.
   */
  insightParts(): DraftInsightParts | undefined {
    const strategy = this.core.strategy;
    if (!this.evaluation || !(strategy instanceof Eagle3TrainStrategy)) return undefined;
    return { gpu: this.inputs.gpu, strategy, batches: this.evaluation.batches, d2t: this.mapping.d2t, globalStep: this.trainer.globalStep };
  }

  async status(): Promise<{ controller: ControllerStatus; featureStore: FeatureStoreHealth; round: number; rounds: number }> {
    return {
      controller: await this.controller.status(),
      featureStore: this.store.health(),
      round: this.nextRound,
      rounds: this.rounds.length,
    };
  }

  destroy(): void {
    for (const o of this.owned) o.destroy();
    this.owned.length = 0;
  }
}
