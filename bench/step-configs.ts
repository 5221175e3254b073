/**
 * The EAGLE3 draft configs the step benchmarks time (bench/step-roofline.ts, step-profile.ts,
 * step-threads.ts), one source for all three:
 *   mid      bench/train.ts's `mid` draft (SpecForge's reference throughput shape) at batch 1 × 128, TTT 7
 *   lab      the draft `speclab train` builds for the lab target (assets/lab-target) at batch 4 × 56, TTT 4
 *   fixture  the SpecForge fixture's draft (fixtures/eagle3) at the fixture's own batch, length and TTT
 * `quick` shrinks mid and lab to a few tokens (a smoke run of every config in about a minute).
 */
import { parseEagle3Config, type Eagle3Config } from '../src/config/eagle3-config.ts';
import { parseHfConfig } from '../src/config/hf-config.ts';
import { SafetensorsFile } from '../src/formats/safetensors.ts';
import type { TargetModel } from '../src/model/target/model.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { draftConfigFor } from '../src/training/sequences/eagle3-data.ts';
import { resolveDraftVocabSize } from '../src/training/sequences/draft-shape.ts';
import type { StepShape } from './train-rig.ts';

export interface StepBenchConfig {
  config: Eagle3Config;
  shape: StepShape;
}

/** SpecForge's reference throughput draft (bench/train.ts `--config mid` trains it too). */
export const MID_DRAFT: Eagle3Config = {
  hiddenSize: 1024,
  intermediateSize: 2816,
  numHeads: 16,
  numKvHeads: 4,
  headDim: 64,
  vocabSize: 32000,
  draftVocabSize: 8000,
  targetHiddenSize: 1024,
  rmsNormEps: 1e-6,
  ropeTheta: 10000,
  maxPositionEmbeddings: 4096,
};

async function midConfig(quick: boolean): Promise<StepBenchConfig> {
  return { config: MID_DRAFT, shape: quick ? { batch: 1, seq: 32, ttt: 2 } : { batch: 1, seq: 128, ttt: 7 } };
}

async function labConfig(quick: boolean): Promise<StepBenchConfig> {
  const target = parseHfConfig(
    new TextDecoder().decode(await nodePlatform.files('assets/lab-target').read('config.json')),
    'assets/lab-target/config.json',
  );
  // draftConfigFor reads only the target's config.
  const config = draftConfigFor({ config: target } as unknown as TargetModel, resolveDraftVocabSize(undefined, target.vocabSize));
  return { config, shape: quick ? { batch: 1, seq: 56, ttt: 2 } : { batch: 4, seq: 56, ttt: 4 } };
}

async function fixtureConfig(): Promise<StepBenchConfig> {
  const files = nodePlatform.files(nodePlatform.env('SPECLAB_FIXTURES') ?? '../shared/fixtures');
  const config = parseEagle3Config(new TextDecoder().decode(await files.read('eagle3/draft_config.json')), 'eagle3/draft_config.json');
  const ref = new SafetensorsFile(await files.read('eagle3/eagle3_reference.safetensors'), 'eagle3_reference');
  const [batch, seq] = ref.shape('input_ids') as [number, number];
  const ttt = Number(ref.header.metadata.ttt_length);
  if (!Number.isInteger(ttt) || ttt < 1)
    throw new Error(
      `bench/step-configs.ts: eagle3_reference metadata ttt_length ${ref.header.metadata.ttt_length} is not a positive integer`,
    );
  return { config, shape: { batch, seq, ttt } };
}

export const STEP_CONFIGS: Readonly<Record<string, (quick: boolean) => Promise<StepBenchConfig>>> = {
  mid: midConfig,
  lab: labConfig,
  fixture: fixtureConfig,
};

/** The configs named in `--configs` (comma-separated); an unknown name is refused, naming `script`. */
export function wantedStepConfigs(script: string, list: string): string[] {
  const names = list.split(',');
  for (const name of names)
    if (!STEP_CONFIGS[name])
      throw new Error(`${script}: unknown --configs entry "${name}" (known: ${Object.keys(STEP_CONFIGS).join(', ')})`);
  return names;
}
