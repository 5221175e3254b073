/**
 * `speclab train`: train an EAGLE3 draft for a target model online, through the runtime planes, and
 * show by speculative decoding that the trained draft beats the untrained one.
 *
 *   speclab train [--target <hf dir>] [--data <conversations>… | --prompts-file <json>] [--out <dir>]
 *                 [--config <json file>] [--resume | --fresh] [options]   (train-options.ts, `speclab train --help`)
 *
 * This file reads the settings the command gives (the `--config` file, flags over it) and makes one
 * call: the run is src/training/run/train-run.ts (on `--resume` the stored settings first, then
 * data, memory plan, run folder, session, evaluation before and after, the steps, export, summary).
 * The data is a chat dataset (`--data`: its own replies, or `--regenerate`d by the target), or
 * prompts the target continues so the draft learns the target's own outputs: a prompts file of
 * token-id arrays, the lab corpus for the lab target, or seeded random prompts. `--offline DIR`
 * trains from features `speclab prepare` wrote (src/training/run/train-offline.ts).
 * A killed run continues with `--resume` from its last checkpoint (same stream, same losses); an
 * existing run in --out is never overwritten silently (`--fresh` deletes it). Ctrl-C while training
 * finishes the step, writes a checkpoint and exits 130. Progress lines go to the terminal;
 * <out>/metrics.jsonl gets one JSON record per step and phase.
 */
import type { GpuContext } from '../gpu/context.ts';
import { validateTrainConfig, type TrainConfig } from '../training/run/run-config.ts';
import { readJson } from '../training/run/run-plan.ts';
import { trainWithSettings, type GivenSettings } from '../training/run/train-run.ts';
import type { Platform } from './platform.ts';
import { commandHelp, settingsOrExit, UsageError } from './options.ts';
import { checkClusterSettings, normalizeConfigKeys, parseTrainFlags, TRAIN_DEF, trainArgs, type TrainFlags } from './train-options.ts';

export { trainConfigSchema, validateTrainConfig, type TrainConfig } from '../training/run/run-config.ts';
export type { TrainSummary } from '../training/run/train-run.ts';
export { parseTrainFlags, TRAIN_DEF } from './train-options.ts';

/** The help of `speclab train`: every setting with its type, range and default. */
export function trainUsage(): string {
  return commandHelp(TRAIN_DEF);
}

export async function loadTrainConfig(platform: Platform, args: readonly string[]): Promise<TrainConfig> {
  return configFromFlags(platform, parseTrainFlags(args));
}

/** The settings this command gives, unvalidated: the `--config` file's (any accepted key form), flags over them. */
async function givenSettings(platform: Platform, flags: TrainFlags): Promise<GivenSettings> {
  const { configFile, values } = flags;
  let base: Record<string, unknown> = {};
  if (configFile) {
    const json = await readJson(platform, configFile);
    if (json === null || typeof json !== 'object' || Array.isArray(json))
      throw new UsageError(`${configFile}: expected a JSON object of settings`);
    const notices: string[] = [];
    base = normalizeConfigKeys(json as Record<string, unknown>, configFile, notices);
    for (const notice of notices) console.error(notice);
  }
  const source = configFile ? `${configFile} + flags` : 'train flags';
  const keys = new Set([...Object.keys(values).filter((k) => values[k] !== undefined), ...Object.keys(base)]);
  return { input: checkClusterSettings({ ...base, ...values }, source), source, keys };
}

/** The settings, validated (errors name the field and its flag). */
export async function configFromFlags(platform: Platform, flags: TrainFlags): Promise<TrainConfig> {
  const given = await givenSettings(platform, flags);
  return validateTrainConfig(given.input, given.source);
}

/** Runs `speclab train` from argv; `gpuContext` (tests) replaces acquiring a device from the platform. */
export async function trainCommand(
  platform: Platform,
  args: readonly string[],
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const p = settingsOrExit(TRAIN_DEF, args, trainArgs, print);
  return 'exit' in p ? p.exit : runTrainCli(platform, p.settings, print, gpuContext);
}

/**
 * `speclab train` with parsed flags: one call with the settings they give (trainWithSettings,
 * src/training/run/train-run.ts: validation, stored settings on --resume, interrupts, --offline,
 * the exit code).
 */
export async function runTrainCli(
  platform: Platform,
  flags: TrainFlags,
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  return trainWithSettings(platform, await givenSettings(platform, flags), print, gpuContext);
}
