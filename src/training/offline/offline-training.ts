/**
 * Offline EAGLE3 training: a draft trained from a prepared feature set (src/data/offline-eagle3.ts)
 * instead of features captured live. Data path, as SpecForge's offline mode (docs/features.md §3–§5):
 *
 *   OfflineManifestReader (file:// refs, lazy) → LocalFeatureStore (reads each shard on get)
 *   → FeatureDataLoader (refs mode + the normaliser of docs/features.md §5) → TrainerController
 *   → Eagle3TrainStrategy with the target head (the target's frozen lm_head on the GPU)
 *
 * Sample order: `epochs` seeded permutations of the samples drawn from Rng(seed + 2), batched in
 * that order, the same stream as the online session (eagle3-session.ts). With the same settings
 * (and round sizes that are multiples of the batch size, as by default) both paths therefore see the
 * same batches, and their losses agree (test/training/offline/offline-training.test.ts).
 *
 * Durability: with a checkpoints store, every `checkpointEvery` steps and at the last one the step is
 * checkpointed in the session's format with the same extras (eagle3RunExtras: draft config, t2d/d2t,
 * settings; mode "offline"), after `onStep` has been awaited for it; the newest two are kept. There is
 * no ledger: a checkpoint's data position (samples consumed) says where the stream continues, so a
 * run reopened on the same store resumes from its newest complete checkpoint (refused when the run
 * contract drifted) and trains exactly the batches an uninterrupted run trains after that step.
 */
import type { FeatureStore } from '../../data/feature-store.ts';
import { FeatureDataLoader } from '../../data/feature-dataloader.ts';
import { LocalFeatureStore } from '../../data/local-feature-store.ts';
import { offlineEagle3Transform, offlineRefs, type OfflineManifest } from '../../data/offline-eagle3.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Eagle3Config } from '../../config/eagle3-config.ts';
import { Eagle3DraftModel } from '../../model/eagle3/model.ts';
import type { TargetModel } from '../../model/target/model.ts';
import { DraftHead } from '../../model/target/draft-head.ts';
import type { FileStore } from '../../ports/storage.ts';
import { Rng } from '../../util/random.ts';
import { AdamWBackend, SPECFORGE_OPTIMIZER } from '../../optim/adamw-backend.ts';
import type { VocabMapping } from '../../model/eagle3/vocab-mapping.ts';
import { shuffledIndices, vocabFromCounts, type DraftVocab } from '../sequences/eagle3-data.ts';
import { Eagle3TrainStrategy } from '../strategies/eagle3.ts';
import { TrainerController, type StepLog } from '../loop/trainer-controller.ts';
import { TrainerCore } from '../loop/trainer-core.ts';
import { eagle3RunExtras } from '../checkpoints/checkpoint-export.ts';
import { checkpointDue, eagle3StepMetrics, saveRunCheckpoint, TRAIN_RUN_ID } from '../checkpoints/run-checkpoints.ts';
import type { RunContract } from '../checkpoints/run-contract.ts';
import { resumeFromCheckpoint } from '../checkpoints/checkpoint-resume.ts';
import { checkpointCounters } from '../checkpoints/resume-consistency.ts';
import { CheckpointRefusedError, pruneCheckpoints } from '../checkpoints/train-checkpoint.ts';
import { stableHash } from '../../util/stable-hash.ts';

export interface OfflineTrainSettings {
  epochs: number;
  batchSize: number;
  tttLength: number;
  lr: number;
  warmupRatio: number;
  maxGradNorm: number;
  seed: number;
  /** Checkpoint every N optimizer steps (and at the last); default 8, as online. Used only with `checkpoints`. */
  checkpointEvery?: number;
  /**
   * 'hidden_state' (the default, --target-repr): each shard's hidden state is made compact on the GPU
   * (full-vocabulary logsumexp and argmax a chunk of rows at a time, the draft tokens' logits from the
   * lm_head rows of the draft vocabulary); 'logits': projected to full logits per micro-batch. The same bits.
   */
  targetRepr?: 'hidden_state' | 'logits';
  /** --recompute: 'on' recomputes each TTT step in the backward (the same bits); offline has no plan, so 'auto' is off. */
  recompute?: 'auto' | 'on' | 'off';
}

/** One optimizer step as offline training reports it (the fields of the online SessionStep it has). */
export interface OfflineTrainStep extends StepLog {
  totalSteps: number;
  plosses: number[];
  accs: number[];
  simulatedAcceptance: number;
  checkpointed: boolean;
}

/** What a resume must find unchanged: the draft, the stream (epochs, seed, samples) and the feature set itself. */
export function offlineContract(manifest: OfflineManifest, settings: OfflineTrainSettings, draftConfig: Eagle3Config): RunContract {
  return {
    strategy: 'eagle3',
    tttLength: settings.tttLength,
    batchSize: settings.batchSize,
    accumulationSteps: 1,
    draftConfigHash: stableHash({
      mode: 'offline',
      draftConfig,
      auxLayerIds: manifest.auxLayerIds,
      epochs: settings.epochs,
      seed: settings.seed,
      samples: manifest.samples,
    }),
    dataHash: stableHash(manifest),
  };
}

/** The sample stream: `epochs` permutations from one Rng(seed + 2), as the online session draws them. */
export function offlineStream(samples: number, epochs: number, seed: number): number[] {
  const order = new Rng(seed + 2);
  const stream: number[] = [];
  for (let e = 0; e < epochs; e++) stream.push(...shuffledIndices(samples, order));
  return stream;
}

/** Vocabulary mapping from the manifest's loss-token counts, and the share of those tokens it covers. */
export function offlineVocab(manifest: OfflineManifest, draftVocabSize: number): DraftVocab {
  return vocabFromCounts(new Map(manifest.lossTokenCounts.map(([id, n]) => [id, n] as const)), manifest.vocabSize, draftVocabSize);
}

/** Throws naming the manifest field when the feature set was prepared for another target shape. */
export function checkManifestTarget(manifest: OfflineManifest, target: TargetModel, where: string): void {
  const c = target.config;
  for (const [field, want, have] of [
    ['numLayers', manifest.numLayers, c.numLayers],
    ['hiddenSize', manifest.hiddenSize, c.hiddenSize],
    ['vocabSize', manifest.vocabSize, c.vocabSize],
  ] as const) {
    if (want !== have)
      throw new Error(`${where}: ${field} ${want} in the manifest, but the target has ${have} (prepared for another target)`);
  }
  for (const id of manifest.auxLayerIds)
    if (id >= c.numLayers) throw new Error(`${where}: aux layer ${id} outside the target's layers 0..${c.numLayers - 1}`);
}

export interface OfflineTrainInputs {
  gpu: Gpu;
  target: TargetModel;
  /** The prepared feature set's folder. */
  files: FileStore;
  manifest: OfflineManifest;
  /** Also recorded in every checkpoint as extra.settings, as given (the CLI passes its whole config). */
  settings: OfflineTrainSettings;
  draftConfig: Eagle3Config;
  /** The trainable weights to start from (initialEagle3Weights(…, 'shared', …)); the embedding is the target's. */
  initialWeights: Readonly<Record<string, Float32Array>>;
  mapping: VocabMapping;
  /**
   * Checkpoints (`<runId>-step<N>/`): saved every `checkpointEvery` steps; the newest complete one is
   * resumed from when there is one. Without it nothing is saved or resumed.
   */
  checkpoints?: FileStore;
  /** Default TRAIN_RUN_ID, as `speclab train`. */
  runId?: string;
  /** Called once the run is restored from the checkpoint of this step. */
  onResume?: (step: number) => void;
  /** Each optimizer step, awaited BEFORE its checkpoint: a metrics log written here holds every step a resume will not train again. */
  onStep?: (step: OfflineTrainStep) => void | Promise<void>;
}

export interface OfflineTrainResult {
  /** The global step reached (the run's last step once it is complete). */
  steps: number;
  totalSteps: number;
  /** The step this call resumed from (undefined: a fresh run). */
  resumedFrom?: number;
  /** Losses of the steps this call trained. */
  losses: number[];
  /** Trained draft weights by parameter name (no embedding). */
  weights: Record<string, Float32Array>;
}

export async function trainEagle3Offline(inputs: OfflineTrainInputs): Promise<OfflineTrainResult> {
  const { gpu, target, files, manifest, settings, checkpoints } = inputs;
  checkManifestTarget(manifest, target, `${files.root}/manifest.json`);
  const refs = await offlineRefs(files, manifest, settings.tttLength);
  const stream = offlineStream(refs.length, settings.epochs, settings.seed).map((i) => refs[i]);
  const totalSteps = Math.ceil(stream.length / settings.batchSize);
  const runId = inputs.runId ?? TRAIN_RUN_ID;
  const contract = offlineContract(manifest, settings, inputs.draftConfig);

  const backend = new AdamWBackend(gpu, {
    ...SPECFORGE_OPTIMIZER,
    lr: settings.lr,
    maxGradNorm: settings.maxGradNorm,
    schedule: { kind: 'cosine', totalSteps, warmupRatio: settings.warmupRatio },
  });
  let draft: Eagle3DraftModel | undefined;
  let draftHead: DraftHead | undefined;
  try {
    // The frozen embedding is the target's own table on the GPU (borrowed, not copied).
    draft = new Eagle3DraftModel(
      gpu,
      backend,
      inputs.draftConfig,
      inputs.initialWeights,
      { t2d: inputs.mapping.t2d, d2t: inputs.mapping.d2t },
      { embed: target.weights.embedTokens },
    );
    if ((settings.targetRepr ?? 'hidden_state') === 'hidden_state')
      draftHead = await DraftHead.gather(gpu, target.weights, inputs.mapping.used);
    const strategy = new Eagle3TrainStrategy(draft, {
      tttLength: settings.tttLength,
      targetHead: target,
      draftHead,
      recompute: settings.recompute === 'on',
    });
    const core = new TrainerCore(strategy, backend, 1);
    const trainer = new TrainerController(gpu, core);
    const restored = checkpoints ? await resumeFromCheckpoint(checkpoints, gpu, backend, { runId, contract }) : undefined;
    let consumed = 0;
    if (restored) {
      const { state, ref } = restored;
      // Sealed alone, the counters must still agree with each other (an edited optimizer step moves the schedule).
      const counters = checkpointCounters({ source: `${checkpoints!.root}/${ref.dir}/state.json`, state });
      if (counters) throw new CheckpointRefusedError(`resume ${runId}: ${counters}`);
      consumed = state.data.samplesConsumed;
      const expected = Math.min(state.globalStep * settings.batchSize, stream.length);
      if (consumed !== expected)
        throw new CheckpointRefusedError(
          `resume ${runId} from ${checkpoints!.root}/${ref.dir}: ${consumed} samples consumed at step ${state.globalStep}, the stream of batch ${settings.batchSize} has ${expected} there`,
        );
      trainer.globalStep = state.globalStep;
      core.microStep = state.microStep;
      inputs.onResume?.(state.globalStep);
    }
    const extras = eagle3RunExtras({
      mode: 'offline',
      draftConfig: inputs.draftConfig,
      auxLayerIds: manifest.auxLayerIds,
      targetLayers: manifest.numLayers,
      vocab: inputs.mapping,
      settings,
    });
    const every = settings.checkpointEvery ?? 8;
    let lastCheckpoint = restored?.state.globalStep ?? 0;
    let losses: number[] = [];
    const rest = stream.slice(consumed);
    if (rest.length > 0) {
      const store: FeatureStore = new LocalFeatureStore(gpu, { storeId: 'offline', files });
      const H = manifest.hiddenSize;
      const loader = new FeatureDataLoader(
        gpu,
        store,
        { refs: rest },
        { batchSize: settings.batchSize, dropLast: false, transform: offlineEagle3Transform(gpu, H, manifest.auxLayerIds.length * H) },
      );
      let log: StepLog | undefined;
      const fit = await trainer.fit(loader, {
        onStep: (l) => (log = l),
        ackFn: async (ids, step) => {
          consumed += ids.length;
          const checkpointed = checkpoints !== undefined && checkpointDue(step, every, totalSteps);
          await inputs.onStep?.({ ...log!, totalSteps, ...eagle3StepMetrics(log!.metrics, settings.tttLength), checkpointed });
          if (!checkpoints || !checkpointed) return;
          await saveRunCheckpoint(checkpoints, gpu, backend, {
            runId,
            globalStep: step,
            microStep: core.microStep,
            samplesConsumed: consumed,
            contract,
            extras,
          });
          await pruneCheckpoints(checkpoints, runId, lastCheckpoint);
          lastCheckpoint = step;
        },
      });
      losses = fit.losses;
    }
    const weights: Record<string, Float32Array> = {};
    for (const p of backend.params) weights[p.name] = (await gpu.read(p.value)) as Float32Array;
    return { steps: trainer.globalStep, totalSteps, resumedFrom: restored?.state.globalStep, losses, weights };
  } finally {
    draftHead?.destroy();
    draft?.destroy();
    backend.destroy();
  }
}
