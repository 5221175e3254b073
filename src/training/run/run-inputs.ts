/**
 * What a run reads before it touches the GPU or the run folder: the target (its directory, config
 * and the headers of its weight files, every tensor checked for presence, dtype and shape; the
 * weights themselves are streamed onto the GPU later, slice by slice), the aux layers and draft
 * vocabulary size chosen for it, and the training data (./train-data.ts). Everything that can be
 * refused without training is refused here, so a refused start leaves `--out` as it was.
 */
import type { TargetModelConfig } from '../../config/hf-config.ts';
import { HfCheckpointSource } from '../../formats/hf-checkpoint-source.ts';
import { resolveAuxLayers, resolveDraftVocabSize } from '../sequences/draft-shape.ts';
import type { TrainConfig } from './run-config.ts';
import type { RunPlatform } from './platform.ts';
import { resolveTargetDir, usesLabCorpus } from './run-plan.ts';
import { trainingData, type TrainData } from './train-data.ts';

export interface RunInputs {
  readonly targetDir: string;
  /** The target's weight files, opened and validated from their headers (no weight read yet). */
  readonly source: HfCheckpointSource;
  readonly tc: TargetModelConfig;
  readonly auxLayerIds: number[];
  readonly draftVocabSize: number;
  readonly data: TrainData;
}

export async function readRunInputs(platform: RunPlatform, config: TrainConfig, print?: (line: string) => void): Promise<RunInputs> {
  const targetDir = await resolveTargetDir(platform, config.target, print);
  const useLabCorpus = usesLabCorpus(targetDir, config.promptsFile);
  const source = await HfCheckpointSource.open(platform.files(targetDir), '');
  const tc = source.config;
  const auxLayerIds = resolveAuxLayers(config.auxLayers, tc.numLayers);
  const draftVocabSize = resolveDraftVocabSize(config.draftVocabSize, tc.vocabSize);
  const data = await trainingData(platform, config, targetDir, tc, useLabCorpus);
  return { targetDir, source, tc, auxLayerIds, draftVocabSize, data };
}
