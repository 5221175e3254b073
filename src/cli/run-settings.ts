/**
 * Which settings a `speclab train` command gave (its flags and its `--config` file's keys): what
 * the resume rule (src/training/run/run-settings.ts) compares with a run's stored settings.
 */
import { readJson, type FileRoots } from '../training/run/run-plan.ts';
import { withStoredSettings as resumeWithStoredSettings } from '../training/run/run-settings.ts';
import type { RunFolderConfig } from '../training/run/run-folder.ts';
import { normalizeConfigKeys, type TrainFlags } from './train-options.ts';

export { OVERRIDABLE } from '../training/run/run-settings.ts';
export { openRunFolder, resumeCommand, storedRunSettings, type RunFolder, type RunFolderConfig } from '../training/run/run-folder.ts';

/** The setting keys this command gave: its flags and its `--config` file's keys. */
export async function givenKeys(roots: FileRoots, flags: TrainFlags): Promise<Set<string>> {
  const keys = new Set(Object.keys(flags.values).filter((k) => flags.values[k] !== undefined));
  if (flags.configFile)
    for (const k of Object.keys(
      normalizeConfigKeys((await readJson(roots, flags.configFile)) as Record<string, unknown>, flags.configFile),
    ))
      keys.add(k);
  return keys;
}

/** The settings of this start with the flags' given keys (src/training/run/run-settings.ts has the rule). */
export async function withStoredSettings<C extends RunFolderConfig>(
  roots: FileRoots,
  flags: TrainFlags,
  config: C,
  validate: (input: Record<string, unknown>, source: string) => C,
  notice?: (line: string) => void,
): Promise<C> {
  if (!config.resume || config.fresh) return config;
  return resumeWithStoredSettings(roots, await givenKeys(roots, flags), config, validate, notice);
}
