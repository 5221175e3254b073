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
 * same batches, and their losses agree (test/training/offline-training.test.ts).
 */
import type { FeatureStore } from '../data/feature-store.ts';
import { FeatureDataLoader } from '../data/feature-dataloader.ts';
import { LocalFeatureStore } from '../data/local-feature-store.ts';
import { offlineEagle3Transform, offlineRefs, type OfflineManifest } from '../data/offline-eagle3.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { Eagle3Config } from '../config/eagle3-config.ts';
import { Eagle3DraftModel } from '../model/eagle3/model.ts';
import type { TargetModel } from '../model/target/model.ts';
import type { FileStore } from '../ports/storage.ts';
import { Rng } from '../util/random.ts';
import { AdamWBackend, SPECFORGE_OPTIMIZER } from '../optim/adamw-backend.ts';
import type { VocabMapping } from '../model/eagle3/vocab-mapping.ts';
import { shuffledIndices, vocabFromCounts, type DraftVocab } from './eagle3-data.ts';
import { Eagle3TrainStrategy } from './strategies/eagle3.ts';
import { TrainerController, type StepLog } from './trainer-controller.ts';
import { TrainerCore } from './trainer-core.ts';

export interface OfflineTrainSettings {
  epochs: number;
  batchSize: number;
  tttLength: number;
  lr: number;
  warmupRatio: number;
  maxGradNorm: number;
  seed: number;
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
    if (want !== have) throw new Error(`${where}: ${field} ${want} in the manifest, but the target has ${have} (prepared for another target)`);
  }
  for (const id of manifest.auxLayerIds) if (id >= c.numLayers) throw new Error(`${where}: aux layer ${id} outside the target's layers 0..${c.numLayers - 1}`);
}

export interface OfflineTrainInputs {
  gpu: Gpu;
  target: TargetModel;
  /** The prepared feature set's folder. */
  files: FileStore;
  manifest: OfflineManifest;
  settings: OfflineTrainSettings;
  draftConfig: Eagle3Config;
  initialWeights: Readonly<Record<string, Float32Array>>;
  mapping: VocabMapping;
  onStep?: (log: StepLog, totalSteps: number) => void;
}

export interface OfflineTrainResult {
  steps: number;
  losses: number[];
  /** Trained draft weights by parameter name (no embedding). */
  weights: Record<string, Float32Array>;
}

export async function trainEagle3Offline(inputs: OfflineTrainInputs): Promise<OfflineTrainResult> {
  const { gpu, target, files, manifest, settings } = inputs;
  checkManifestTarget(manifest, target, `${files.root}/manifest.json`);
  const refs = await offlineRefs(files, manifest, settings.tttLength);
  const stream = offlineStream(refs.length, settings.epochs, settings.seed).map((i) => refs[i]);
  const totalSteps = Math.ceil(stream.length / settings.batchSize);

  const backend = new AdamWBackend(gpu, {
    ...SPECFORGE_OPTIMIZER,
    lr: settings.lr,
    maxGradNorm: settings.maxGradNorm,
    schedule: { kind: 'cosine', totalSteps, warmupRatio: settings.warmupRatio },
  });
  let draft: Eagle3DraftModel | undefined;
  try {
    draft = new Eagle3DraftModel(gpu, backend, inputs.draftConfig, inputs.initialWeights, { t2d: inputs.mapping.t2d, d2t: inputs.mapping.d2t });
    const strategy = new Eagle3TrainStrategy(draft, { tttLength: settings.tttLength, targetHead: target });
    const trainer = new TrainerController(gpu, new TrainerCore(strategy, backend, 1));
    const store: FeatureStore = new LocalFeatureStore(gpu, { storeId: 'offline', files });
    const H = manifest.hiddenSize;
    const loader = new FeatureDataLoader(gpu, store, { refs: stream }, { batchSize: settings.batchSize, dropLast: false, transform: offlineEagle3Transform(gpu, H, manifest.auxLayerIds.length * H) });
    const fit = await trainer.fit(loader, { onStep: (log) => inputs.onStep?.(log, totalSteps) });
    const weights: Record<string, Float32Array> = {};
    for (const p of backend.params) weights[p.name] = (await gpu.read(p.value)) as Float32Array;
    return { steps: fit.globalStep, losses: fit.losses, weights };
  } finally {
    draft?.destroy();
    backend.destroy();
  }
}
