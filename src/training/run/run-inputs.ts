/**
 * What a run reads before it touches the GPU or the run folder: the target (its directory, config
 * and weights), the aux layers and draft vocabulary size chosen for it, and the training data
 * (./train-data.ts). Everything that can be refused without training is refused here, so a refused
 * start leaves `--out` as it was.
 */
import type { TargetModelConfig } from '../../config/hf-config.ts';
import { loadHfCheckpoint, type MatrixWeight, type TargetCheckpoint } from '../../formats/hf-checkpoint.ts';
import { resolveAuxLayers, resolveDraftVocabSize } from '../sequences/draft-shape.ts';
import type { TrainConfig } from './run-config.ts';
import type { RunPlatform } from './platform.ts';
import { resolveTargetDir, usesLabCorpus } from './run-plan.ts';
import { trainingData, type TrainData } from './train-data.ts';

export interface RunInputs {
  readonly targetDir: string;
  readonly checkpoint: TargetCheckpoint<MatrixWeight>;
  readonly tc: TargetModelConfig;
  readonly auxLayerIds: number[];
  readonly draftVocabSize: number;
  readonly data: TrainData;
}

export async function readRunInputs(platform: RunPlatform, config: TrainConfig): Promise<RunInputs> {
  const targetDir = await resolveTargetDir(platform, config.target);
  const useLabCorpus = usesLabCorpus(targetDir, config.promptsFile);
  const checkpoint = await loadHfCheckpoint(platform.files(targetDir), '', { weightPrecision: config.targetPrecision });
  const tc = checkpoint.config;
  const auxLayerIds = resolveAuxLayers(config.auxLayers, tc.numLayers);
  const draftVocabSize = resolveDraftVocabSize(config.draftVocabSize, tc.vocabSize);
  const data = await trainingData(platform, config, targetDir, tc, useLabCorpus);
  return { targetDir, checkpoint, tc, auxLayerIds, draftVocabSize, data };
}
