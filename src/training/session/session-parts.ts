/**
 * How an Eagle3TrainingSession (./eagle3-session.ts) is built from its inputs: the sequences (read or
 * generated), the draft vocabulary and config, the seeded stream cut into rounds, the controller and
 * feature store (local, or the cluster's), the rollout workers, optimizer, draft, strategy, trainer
 * and loader, and the run contract its checkpoints keep. Also the capture a session's rollout makes,
 * which a rollout process of a cluster run must make the same.
 */
import { DataFlowController } from '../../control/controller.ts';
import type { ReleasableFeatureStore } from '../../control/controller.ts';
import type { TrainLease } from '../../control/train-lease.ts';
import { onlineSampleId, type TrainBatch } from '../../contracts/index.ts';
import { FeatureDataLoader, type RefLease } from '../../data/feature-dataloader.ts';
import type { FeatureStore } from '../../data/feature-store.ts';
import { LocalFeatureStore } from '../../data/local-feature-store.ts';
import { RolloutWorker } from '../../inference/rollout-worker.ts';
import { eagle3CaptureConfig, TargetFeatureSource } from '../../inference/target-feature-source.ts';
import type { CaptureConfig } from '../../inference/capture.ts';
import type { DType, Tensor } from '../../gpu/tensor.ts';
import { TargetModel } from '../../model/target/model.ts';
import type { Eagle3Config } from '../../config/eagle3-config.ts';
import { Eagle3DraftModel } from '../../model/eagle3/model.ts';
import { initialEagle3Weights } from '../../model/eagle3/parameters.ts';
import { Rng } from '../../util/random.ts';
import type { VocabMapping } from '../../model/eagle3/vocab-mapping.ts';
import { AdamWBackend, SPECFORGE_OPTIMIZER } from '../../optim/adamw-backend.ts';
import { eagle3RunExtras } from '../checkpoints/checkpoint-export.ts';
import { type RunContract } from '../checkpoints/train-checkpoint.ts';
import { eagle3StepMetrics } from '../checkpoints/run-checkpoints.ts';
import type { StepLog } from '../loop/trainer-controller.ts';
import { draftConfigFor, draftVocab, sessionSequences, shuffledIndices, type TrainSequence } from '../sequences/eagle3-data.ts';
import { precisionContract } from '../loop/feature-precision.ts';
import { PeriodicEvaluation } from '../evaluation/periodic-eval.ts';
import { resolveAuxLayers, resolveDraftVocabSize } from '../sequences/draft-shape.ts';
import { Eagle3TrainStrategy } from '../strategies/eagle3.ts';
import { TrainerController } from '../loop/trainer-controller.ts';
import { TrainerCore } from '../loop/trainer-core.ts';
import { StreamOrderLease } from './stream-order-lease.ts';
import { stableHash } from '../../util/stable-hash.ts';

import { type SessionInputs, type SessionSettings, type SessionStep } from './session-types.ts';

export type SessionLease = RefLease & Pick<TrainLease, 'ack'>;

/** What the rollout of a session captures per sample; a rollout process of a cluster run must capture the same. */
export function sessionCapture(
  target: TargetModel['config'],
  auxLayerIds: readonly number[],
  settings: Pick<SessionSettings, 'tttLength' | 'featurePrecision'> & { targetRepr?: SessionSettings['targetRepr'] },
): CaptureConfig {
  return {
    ...eagle3CaptureConfig(target, auxLayerIds, settings.targetRepr ?? 'logits'),
    extra: { ttt_length: settings.tttLength },
    featurePrecision: settings.featurePrecision,
  };
}

/** The feature-store columns of that capture: token ids and masks i32, hidden states and logits at the feature precision. */
export function sessionFeatureFields(capture: CaptureConfig): Record<string, DType> {
  const float: DType = capture.featurePrecision === 'f16' ? 'f16' : 'f32';
  const fixed: Readonly<Record<string, DType>> = { input_ids: 'i32', loss_mask: 'i32', target_tok: 'i32', target_lse: 'f32' };
  return Object.fromEntries(capture.featureNames.map((n) => [n, fixed[n] ?? float]));
}

/** Everything `open` builds for a session, handed to the constructor in one piece. */
export interface SessionParts {
  sequences: readonly TrainSequence[];
  mapping: VocabMapping;
  coverage: number;
  distinctTokens: number;
  draftConfig: Eagle3Config;
  auxLayerIds: readonly number[];
  initialWeights: Readonly<Record<string, Float32Array>>;
  totalSteps: number;
  contract: RunContract;
  inputs: SessionInputs;
  evaluation?: PeriodicEvaluation;
  /** The rounds of the whole stream; `resume` trims the committed tasks out of them. */
  rounds: { taskId: string; sequence: number }[][];
  controller: DataFlowController;
  store: FeatureStore & ReleasableFeatureStore;
  workers: RolloutWorker[];
  backend: AdamWBackend;
  core: TrainerCore;
  trainer: TrainerController;
  loader: FeatureDataLoader;
  lease: SessionLease;
  /** GPU objects the session destroys with itself. */
  owned: { destroy(): void }[];
  /** What every checkpoint keeps so that it is exported and resumed alone (`eagle3RunExtras`). */
  extras: ReturnType<typeof eagle3RunExtras>;
}

/**
 * The samples of each optimizer step of a stream of `samples` (epochs × sequences), in order: the
 * stream is cut into rounds of `roundPrompts`, each round trained in steps of `batchSize` whose last
 * takes what is left of the round (a step never spans two rounds). What the run's log reports.
 */
export function plannedStepSamples(samples: number, settings: { roundPrompts: number; batchSize: number }): number[] {
  const steps: number[] = [];
  for (let start = 0; start < samples; start += settings.roundPrompts) {
    const round = Math.min(settings.roundPrompts, samples - start);
    for (let taken = 0; taken < round; taken += settings.batchSize) steps.push(Math.min(settings.batchSize, round - taken));
  }
  return steps;
}

/** Builds everything a session runs on, from its inputs (generating or reading its sequences). */
export async function buildSessionParts(inputs: SessionInputs): Promise<SessionParts> {
  const { gpu, target, settings, storage, runId } = inputs;
  const tc = target.config;
  // Writing sequences, capturing (rollout workers, held-out features) need the model; the draft only its tables.
  const model = target instanceof TargetModel ? target : undefined;
  const needs = [
    ...(inputs.trainSequences ? [] : ['sequences the target writes']),
    ...(inputs.cluster ? [] : ['rollout workers']),
    ...(inputs.evaluation ? ['held-out features'] : []),
  ];
  if (!model && needs.length > 0) throw new Error(`Eagle3TrainingSession: ${needs.join(', ')} need the target model, not only its tables`);
  const emit = inputs.onEvent ?? (() => undefined);
  const auxLayerIds = resolveAuxLayers(settings.auxLayers, tc.numLayers, { field: 'auxLayers' });
  const draftVocabSize = resolveDraftVocabSize(settings.draftVocabSize, tc.vocabSize, 'draftVocabSize');
  const sequences = await sessionSequences(
    storage.checkpoints,
    model,
    inputs,
    settings.responseLength,
    (detail) => emit({ kind: 'phase', phase: 'data', detail }),
    inputs.progress,
  );
  const { mapping, coverage, distinct } = draftVocab(sequences, tc.vocabSize, draftVocabSize);
  const draftConfig = draftConfigFor(target, draftVocabSize);
  const initialWeights = initialEagle3Weights(draftConfig, 'shared', new Rng(settings.seed + 1));

  const order = new Rng(settings.seed + 2);
  const stream: number[] = [];
  for (let e = 0; e < settings.epochs; e++) stream.push(...shuffledIndices(sequences.length, order));
  const rounds: { taskId: string; sequence: number }[][] = [];
  for (let i = 0, r = 0; i < stream.length; i += settings.roundPrompts, r++) {
    rounds.push(stream.slice(i, i + settings.roundPrompts).map((s, j) => ({ taskId: `r${r}-${j}-s${s}`, sequence: s })));
  }
  const totalSteps = plannedStepSamples(stream.length, settings).length;

  const cluster = inputs.cluster;
  if (cluster && cluster.stores.metadata !== storage.metadata)
    throw new Error('Eagle3TrainingSession: in cluster mode storage.metadata must be cluster.stores.metadata (the shared ledger)');
  const store = cluster ? cluster.features : new LocalFeatureStore(gpu, { spill: storage.spill });
  const controller = cluster
    ? DataFlowController.over(runId, cluster.stores, { featureStore: store })
    : new DataFlowController({ runId, store: storage.metadata, featureStore: store });
  const capture = sessionCapture(tc, auxLayerIds, settings);
  const source = model && new TargetFeatureSource(model);
  const workers: RolloutWorker[] = [];
  for (let i = 0; i < (cluster ? 0 : settings.rolloutWorkers); i++)
    workers.push(await RolloutWorker.create(controller, source!, store, gpu, capture, { workerId: `rollout-${i}` }));
  const backend = new AdamWBackend(gpu, {
    ...SPECFORGE_OPTIMIZER,
    lr: settings.lr,
    maxGradNorm: settings.maxGradNorm,
    schedule: { kind: 'cosine', totalSteps, warmupRatio: settings.warmupRatio },
  });
  const draft = new Eagle3DraftModel(
    gpu,
    backend,
    draftConfig,
    initialWeights,
    { t2d: mapping.t2d, d2t: mapping.d2t },
    {
      embed: target.embedTokens,
    },
  );
  // Compact features: the lm_head rows of the draft vocabulary turn the target's hidden state into the teacher's logits.
  const draftHead = settings.targetRepr === 'hidden_state' ? await target.draftHead(mapping.used) : undefined;
  const strategy = new Eagle3TrainStrategy(draft, {
    tttLength: settings.tttLength,
    gpu,
    draftHead,
    recompute: settings.recompute === 'on',
  });
  const core = new TrainerCore(strategy, backend, 1);
  const evaluation =
    inputs.evaluation && (await PeriodicEvaluation.open(gpu, source!, capture, strategy, settings, inputs.evaluation, inputs.progress));
  const trainer = new TrainerController(gpu, core);
  const trainLease = await controller.trainLease(await controller.registerTrainer({ trainerId: 'trainer-0' }));
  const streamRank = new Map(rounds.flat().map((t, i) => [onlineSampleId(runId, t.taskId), i]));
  const lease: SessionLease = cluster ? new StreamOrderLease(trainLease, controller.queue, streamRank) : trainLease;
  // No prefetch: a step that ends the fit must not leave a leased batch behind (pause, stop).
  const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: settings.batchSize, dropLast: false, prefetch: false });
  const contract: RunContract = {
    strategy: 'eagle3',
    tttLength: settings.tttLength,
    batchSize: settings.batchSize,
    accumulationSteps: 1,
    draftConfigHash: stableHash({
      draftConfig,
      auxLayerIds,
      epochs: settings.epochs,
      roundPrompts: settings.roundPrompts,
      seed: settings.seed,
      sequences: sequences.length,
      ...precisionContract(settings.featurePrecision),
      // Compact features change what the teacher is computed from: a run must not resume as the other form.
      ...(settings.targetRepr === 'logits' ? {} : { targetRepr: settings.targetRepr }),
    }),
    dataHash: stableHash(sequences),
  };
  return {
    inputs,
    sequences,
    mapping,
    coverage,
    distinctTokens: distinct,
    draftConfig,
    auxLayerIds,
    initialWeights,
    totalSteps,
    contract,
    rounds,
    controller,
    store,
    workers,
    backend,
    core,
    trainer,
    loader,
    lease,
    owned: [...(evaluation ? [evaluation] : []), draft, ...(draftHead ? [draftHead] : []), backend],
    evaluation,
    extras: eagle3RunExtras({ mode: 'online', draftConfig, auxLayerIds, targetLayers: tc.numLayers, vocab: mapping, settings }),
  };
}

/** A trainer step as a session reports it: per-TTT-step losses and accuracies, tokens and rate. */
export function stepReport(
  log: StepLog,
  o: { tokens: number; tokensPerSecond: number; totalSteps: number; tttLength: number; checkpointed: boolean },
): SessionStep {
  return {
    ...log,
    totalSteps: o.totalSteps,
    ...eagle3StepMetrics(log.metrics, o.tttLength),
    tokens: o.tokens,
    tokensPerSecond: o.tokensPerSecond,
    checkpointed: o.checkpointed,
  };
}

/** The tokens a step trained on: every sample's real length (a batch is padded to its longest). */
export function batchTokens(batches: readonly TrainBatch<Tensor>[]): number {
  return batches.reduce((a, b) => a + (b.metadata.lengths ?? []).reduce((x, n) => x + n, 0), 0);
}
