/**
 * `speclab prepare`: run the target over a chat dataset or prompts once and write its EAGLE3 features
 * as offline shards (src/data/offline-eagle3.ts), for `speclab train --offline DIR`.
 *
 *   speclab prepare [--target <hf dir>] [--data <file>… | --prompts-file <json>] [--out <dir>] [options]   (options: train-options.ts)
 *
 * The data are chosen exactly as `speclab train` chooses them (same settings, same defaults,
 * src/training/run/train-data.ts): a chat dataset's own replies or `--regenerate`d ones, the lab corpus when
 * the target is the lab target, a --prompts-file, or seeded random prompts continued greedily by the
 * target. So `prepare` then `train --offline` trains on the samples an online `train` with the same
 * settings would capture.
 * The features come from TargetFeatureSource.captureShards: the batched forward of the online path.
 * With --feature-precision f16 the hidden states are cast to f16 on the GPU exactly as the online
 * capture casts them (a value beyond ±65504 refuses the sample, naming it) and written as F16.
 */
import { z } from 'zod';
import { makePromptTask } from '../contracts/index.ts';
import { HfCheckpointSource } from '../formats/hf-checkpoint-source.ts';
import {
  OFFLINE_FORMAT,
  OFFLINE_MANIFEST,
  OFFLINE_SHARD_DIR,
  offlineShardBytes,
  shardPath,
  type OfflineManifest,
} from '../data/offline-eagle3.ts';
import type { GpuContext } from '../gpu/context.ts';
import { Gpu } from '../gpu/gpu.ts';
import { toFeaturePrecision } from '../inference/capture.ts';
import { TargetFeatureSource } from '../inference/target-feature-source.ts';
import { progressFor } from '../training/run/platform.ts';
import { loadTarget } from '../training/run/target-load.ts';
import type { Platform } from './platform.ts';
import { countLossTokens } from '../model/eagle3/vocab-mapping.ts';
import { continueWithTarget, withProgress, type TrainSequence } from '../training/sequences/eagle3-data.ts';
import { regenerateReplies } from '../training/sequences/regenerate.ts';
import { resolveTargetDir, usesLabCorpus } from '../training/run/run-plan.ts';
import { auxLayersLine, resolveAuxLayers } from '../training/sequences/draft-shape.ts';
import { trainingData } from '../training/run/train-data.ts';
import { commandHelp, parseCommand, settingsOrExit, UsageError } from './options.ts';
import { PREPARE_DEF } from './train-options.ts';
import { trainConfigSchema, withTrainPromptsDefault } from '../training/run/run-config.ts';
import { speclabCommand } from '../util/cli-command.ts';

/**
 * The data settings of `speclab train`, taken from its schema so names, defaults and bounds stay
 * the same (e.g. --response-length ≤ 1048576, --train-prompts ≤ 10000000), plus where to write.
 */
export const prepareConfigSchema = trainConfigSchema
  .pick({
    target: true,
    data: true,
    evalData: true,
    chatTemplate: true,
    maxLength: true,
    regenerate: true,
    temperature: true,
    promptsFile: true,
    trainPrompts: true,
    evalPrompts: true,
    promptLength: true,
    responseLength: true,
    auxLayers: true,
    seed: true,
    featurePrecision: true,
  })
  // An offline run measures its acceptance on the manifest's held-out prompts: at least one.
  .extend({ out: z.string().min(1).default('runs/prepared'), evalPrompts: z.number().int().min(1).max(100_000).default(4) })
  .strict();

export type PrepareConfig = z.infer<typeof prepareConfigSchema>;

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** The help of `speclab prepare`. */
export function prepareUsage(): string {
  return commandHelp(PREPARE_DEF);
}

/** Settings from argv: decimal numbers, then the schema's bounds; errors name the flag. */
export function parsePrepareFlags(args: readonly string[]): PrepareConfig {
  return validatePrepareConfig(parseCommand(PREPARE_DEF, args).values);
}

/** The schema's defaults and bounds over parsed flag values. */
export function validatePrepareConfig(values: Record<string, unknown>): PrepareConfig {
  const parsed = prepareConfigSchema.safeParse(values);
  if (!parsed.success) {
    throw new UsageError(
      `prepare flags: ${parsed.error.issues.map((issue) => `${String(issue.path[0] ?? '(root)')} (--${kebab(String(issue.path[0] ?? ''))}): ${issue.message}`).join('; ')}`,
    );
  }
  return withTrainPromptsDefault(parsed.data);
}

export interface PrepareSummary {
  dir: string;
  samples: number;
  tokens: number;
  seconds: number;
}

/** Runs `speclab prepare`; `gpuContext` (tests) replaces acquiring a device from the platform. */
export async function prepareCommand(
  platform: Platform,
  args: readonly string[],
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const p = settingsOrExit(PREPARE_DEF, args, (parsed) => validatePrepareConfig(parsed.values), print);
  if ('exit' in p) return p.exit;
  await runPrepare(platform, p.settings, print, gpuContext);
  return 0;
}

/** `speclab prepare` with parsed flag values (main.ts). */
export async function runPrepareCli(platform: Platform, values: Record<string, unknown>, print: (line: string) => void): Promise<number> {
  await runPrepare(platform, validatePrepareConfig(values), print);
  return 0;
}

export async function runPrepare(
  platform: Platform,
  config: PrepareConfig,
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<PrepareSummary> {
  const started = performance.now();
  const targetDir = await resolveTargetDir(platform, config.target, print);
  const targetFiles = platform.files(targetDir);
  if (!(await targetFiles.exists('config.json')))
    throw new Error(`target (--target) ${targetFiles.root}: no config.json there (expected a Hugging Face model directory)`);

  const out = platform.files(config.out);
  if ((await out.exists(OFFLINE_MANIFEST)) || (await out.list(OFFLINE_SHARD_DIR)).length > 0) {
    throw new Error(
      `out (--out) ${out.root} already holds a prepared feature set (${OFFLINE_MANIFEST} or ${OFFLINE_SHARD_DIR}/); choose an empty directory`,
    );
  }

  const weights = await HfCheckpointSource.open(targetFiles, '');
  const tc = weights.config;
  const auxLayerIds = resolveAuxLayers(config.auxLayers, tc.numLayers);

  // A chat dataset (its own replies, or --regenerate) or prompts, checked before the GPU is taken.
  const data = await trainingData(platform, { ...config, maxNewTokens: 1 }, targetDir, tc, usesLabCorpus(targetDir, config.promptsFile));
  const source = data.lines[0];

  const ctx = gpuContext ?? (await platform.acquireGpu());
  const gpu = new Gpu(ctx);
  const progress = progressFor(platform, print);
  const target = await loadTarget(gpu, weights, 'f32', progress);
  try {
    print(
      `target ${targetDir}: ${tc.numLayers} layers, hidden ${tc.hiddenSize}, vocab ${tc.vocabSize}; ${auxLayersLine(auxLayerIds, tc.numLayers)}`,
    );
    print(`phase data: ${source}`);
    for (const line of data.lines.slice(1)) print(`  ${line}`);
    const regenerate = data.regenerate;
    const prompts = data.trainPrompts ?? [];
    const sequences =
      data.trainSequences ??
      (regenerate
        ? await withProgress(progress, { label: 'regenerating replies', total: regenerate.length, unit: 'conversations' }, (report) =>
            regenerateReplies(target, regenerate, config.responseLength, data.continuation, 16, report),
          )
        : await withProgress(progress, { label: 'continuing prompts', total: prompts.length, unit: 'prompts' }, (report) =>
            continueWithTarget(target, prompts, config.responseLength, 16, data.continuation, report),
          ));

    const features = new TargetFeatureSource(target);
    const chunk = 16;
    const bar = progress.start({ label: 'capturing features', total: sequences.length, unit: 'sequences' });
    try {
      for (let i = 0; i < sequences.length; i += chunk) {
        const part = sequences.slice(i, i + chunk);
        const captured = await features.captureShards(
          part.map((s, j) => taskOf(s, i + j)),
          auxLayerIds,
        );
        try {
          for (const [j, shard] of captured.entries()) {
            const t =
              config.featurePrecision === 'f32' ? shard : await toFeaturePrecision(gpu, shard, config.featurePrecision, `prepare-${i + j}`);
            // The f32 originals are released by the cast; the finally below frees what is left.
            captured[j] = t;
            const sample = {
              inputIds: (await gpu.read(t.input_ids)) as Int32Array,
              lossMask: (await gpu.read(t.loss_mask)) as Int32Array,
              hidden: (await gpu.read(t.hidden_state)) as Float32Array | Uint16Array,
              aux: (await gpu.read(t.aux_hidden_state)) as Float32Array | Uint16Array,
            };
            await out.writeAtomic(shardPath(i + j), offlineShardBytes(sample, tc.hiddenSize, i + j));
          }
        } finally {
          for (const t of captured) gpu.release(...Object.values(t));
        }
        bar.update(Math.min(i + chunk, sequences.length));
      }
    } finally {
      bar.end();
    }
    print(`phase capture: ${sequences.length} shards written to ${out.root}/${OFFLINE_SHARD_DIR}`);

    const tokens = sequences.reduce((a, s) => a + s.inputIds.length, 0);
    const counts = countLossTokens(
      sequences.flatMap((s) => s.inputIds),
      sequences.flatMap((s) => s.lossMask),
      tc.vocabSize,
    );
    const manifest: OfflineManifest = {
      format: OFFLINE_FORMAT,
      version: 1,
      target: targetDir,
      numLayers: tc.numLayers,
      hiddenSize: tc.hiddenSize,
      vocabSize: tc.vocabSize,
      auxLayerIds: [...auxLayerIds],
      samples: sequences.length,
      tokens,
      promptSource: source,
      responseLength: config.responseLength,
      seed: config.seed,
      lossTokenCounts: [...counts],
      trainPrompts: data.evalTrainPrompts,
      heldOutPrompts: data.heldPrompts,
      ...(config.featurePrecision === 'f16' ? { featurePrecision: 'f16' as const } : {}),
    };
    // Written last: a manifest means every shard it counts is on disk.
    await out.writeAtomic(OFFLINE_MANIFEST, new TextEncoder().encode(`${JSON.stringify(manifest)}\n`));
    const seconds = (performance.now() - started) / 1000;
    print(
      `prepared ${sequences.length}${config.featurePrecision === 'f16' ? ' f16' : ''} shards (${tokens} tokens) in ${out.root} in ${seconds.toFixed(1)}s; train with: ${speclabCommand(`train --offline ${out.root}`)}`,
    );
    return { dir: out.root, samples: sequences.length, tokens, seconds };
  } finally {
    target.destroy();
    gpu.destroy();
    if (!gpuContext) ctx.destroy();
  }
}

function taskOf(s: TrainSequence, index: number) {
  return makePromptTask({
    taskId: `prepare-${index}`,
    runId: 'prepare',
    sourceId: 'prepare',
    payload: { input_ids: s.inputIds, loss_mask: s.lossMask },
    maxLength: s.inputIds.length,
  });
}
