/**
 * Test helper: the small EAGLE3 training session the session and resume tests run on the llama-tiny
 * fixture target: its settings (two epochs of six prompts, rounds of six, batch 2: 6 steps,
 * checkpoints at 3, 4 and 6), its run id, and the target with six random 5-token prompts. Shared by
 * test/training/session/eagle3-session.test.ts and test/training/checkpoints/resume-forgery.test.ts.
 */
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import type { Gpu } from '../../../src/gpu/gpu.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import type { FileStore } from '../../../src/ports/storage.ts';
import { sessionSettingsSchema } from '../../../src/training/session/eagle3-session.ts';
import { Rng } from '../../../src/util/random.ts';
import type { TestContext } from '../../harness/suite.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

export const TINY_SESSION_SETTINGS = sessionSettingsSchema.parse({
  epochs: 2,
  roundPrompts: 6,
  batchSize: 2,
  tttLength: 3,
  lr: 1e-2,
  responseLength: 12,
  checkpointEvery: 4,
  rolloutWorkers: 2,
  seed: 3,
});

export const TINY_SESSION_RUN = 'session-test';

/** The llama-tiny target (copied into `files` as `target/`) on `gpu`, and six prompts drawn with `seed`. */
export async function tinySessionTarget(
  ctx: TestContext,
  files: FileStore,
  gpu: Gpu,
  seed = 11,
): Promise<{ target: TargetModel; prompts: number[][] }> {
  await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', files, 'target');
  const checkpoint = await loadHfCheckpoint(files, 'target');
  const target = TargetModel.create(gpu, checkpoint);
  const rng = new Rng(seed);
  const prompts = Array.from({ length: 6 }, () => Array.from({ length: 5 }, () => rng.int(0, checkpoint.config.vocabSize)));
  return { target, prompts };
}
