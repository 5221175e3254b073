/**
 * The rule by which `speclab train --resume` takes a run's stored settings (read by ./run-folder.ts)
 * over the settings this command gives (src/cli/run-settings.ts says which keys it gave).
 *
 * `--resume` reuses the stored settings: `speclab train --out DIR --resume` alone continues the run
 * with the settings of its latest complete checkpoint (`extra.settings`, written by
 * eagle3RunExtras), or, before the first checkpoint, of `DIR/settings.json` (sealed JSON, written
 * by `openRunFolder` once the settings are validated and before any training). Settings given
 * with `--resume` (flags or a `--config` file) are checked against them by this rule:
 *   - overridable (they neither shape the data stream nor the model, so a resume may change them;
 *     `OVERRIDABLE`): --out (where the run is, not what it is), --log-every, --max-nonfinite-steps,
 *     --checkpoint-every (how often the same stream is made durable), and the evaluation-only
 *     --num-draft-tokens, --max-new-tokens, --eval-train-prompts and --eval-every, and --gpu-memory-budget
 *     (a limit of this machine, not of the run), and --cluster (where the run's Redis is now; --run,
 *     the run's name there, is refused); the dataset flags (--data, --eval-data, --chat-template,
 *     --max-length, --regenerate, --temperature) shape the data and are refused;
 *   - every other setting shapes the run and must agree with the stored one or is refused, naming
 *     each differing setting with both values: --target, --prompts-file, --offline, --train-prompts,
 *     --prompt-length, --response-length, --epochs, --round-prompts, --batch-size, --ttt-length,
 *     --lr, --warmup-ratio, --max-grad-norm, --draft-vocab-size, --aux-layers, --seed, also
 *     --eval-prompts (with --prompts-file it decides which prompts are trained) and
 *     --rollout-workers (it splits each round between the workers), and any setting added later
 *     until it is listed as overridable;
 *   - settings not given come from the stored ones (a setting the stored run predates: its default);
 *     a `--data` run started without --train-prompts stored none (every usable conversation), so its
 *     resume trains every usable conversation again, and one that stored a number keeps that cap.
 * A stored key this version does not know is dropped; the run contract check of the resume still
 * guards what it covers (data hash, draft config).
 */
import type { FileRoots } from './run-plan.ts';
import { trainConfigSchema } from './run-config.ts';
import { storedRunSettings, type RunFolderConfig } from './run-folder.ts';

/** Settings a resume may change: they shape neither the data stream nor the model (see above). */
export const OVERRIDABLE: ReadonlySet<string> = new Set([
  'out',
  'resume',
  'fresh',
  'logEvery',
  'maxNonfiniteSteps',
  'checkpointEvery',
  'numDraftTokens',
  'maxNewTokens',
  'evalTrainPrompts',
  'evalEvery',
  'gpuMemoryBudget',
  'cluster',
  // Activation recompute trains the same bits (model/eagle3/step-body.ts): a resume may switch it.
  'recompute',
]);

// Every setting has the flag of its own name (test/cli/cli.test.ts checks the flag table against the schema).
const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const SETTING_KEYS: ReadonlySet<string> = new Set(Object.keys(trainConfigSchema.shape));
/** Keys that say where and how this start runs, never taken from the stored settings. */
const RUN_ONLY: ReadonlySet<string> = new Set(['out', 'resume', 'fresh']);

// A setting left unset shows as such: for --train-prompts with --data, unset means every usable conversation.
const shown = (key: string, value: unknown): string =>
  `--${kebab(key)} ${value === undefined ? '(not set)' : Array.isArray(value) ? value.join(',') : String(value)}`;
const listed = (items: string[]): string => (items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`);

/**
 * The settings of this start: `config` (this command's, validated) unless it resumes a run that
 * stored its settings; then the stored ones with this command's overridable settings over them,
 * validated by `validate`. Refuses a given setting that shapes the run and differs from the stored one.
 */
export async function withStoredSettings<C extends RunFolderConfig>(
  roots: FileRoots,
  /** The setting keys this command gave: its flags and its `--config` file's keys. */
  givenKeys: ReadonlySet<string>,
  config: C,
  validate: (input: Record<string, unknown>, source: string) => C,
  notice?: (line: string) => void,
): Promise<C> {
  if (!config.resume || config.fresh) return config; // --resume --fresh: prepareRunFolder refuses
  const stored = await storedRunSettings(roots, config.out);
  if (!stored) return config; // a run of a version that stored no settings: this command's, as before
  const storedKeys = Object.entries(stored.settings).filter(
    ([k, v]) => SETTING_KEYS.has(k) && !RUN_ONLY.has(k) && v !== undefined && v !== null,
  );
  const storedConfig = validate({ ...Object.fromEntries(storedKeys), out: config.out, resume: true, fresh: false }, stored.source) as C &
    Record<string, unknown>;
  const given = config as C & Record<string, unknown>;
  const keys = [...givenKeys].filter((k) => SETTING_KEYS.has(k) && !RUN_ONLY.has(k));
  const differ = keys.filter((k) => !OVERRIDABLE.has(k) && JSON.stringify(storedConfig[k]) !== JSON.stringify(given[k]));
  if (differ.length > 0) {
    const dir = roots.files(config.out).root;
    throw new Error(
      `--resume: ${dir} was trained with ${listed(differ.map((k) => shown(k, storedConfig[k])))}; this command says ${listed(differ.map((k) => shown(k, given[k])))} (drop ${differ.length > 1 ? 'those flags' : 'that flag'} to continue, or --fresh to start over)`,
    );
  }
  const merged: Record<string, unknown> = { ...storedConfig };
  for (const k of keys) merged[k] = given[k];
  for (const k of Object.keys(merged)) if (merged[k] === undefined) delete merged[k];
  const changed = keys.filter((k) => JSON.stringify(storedConfig[k]) !== JSON.stringify(given[k]));
  notice?.(
    `resume: settings of ${stored.source}${changed.length > 0 ? `; this command changes ${listed(changed.map((k) => shown(k, given[k])))}` : ''}`,
  );
  return validate(merged, `${stored.source} + this command`);
}
