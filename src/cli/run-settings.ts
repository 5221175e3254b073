/**
 * The settings a `speclab train` run keeps, and the run folder one start of it holds.
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
 *     the run's name there, is refused); the dataset flags (--data, --eval-data, --chat-template, --max-length, --regenerate, --temperature) shape the data and are refused;
 *   - every other setting shapes the run and must agree with the stored one or is refused, naming
 *     each differing setting with both values: --target, --prompts-file, --offline, --train-prompts,
 *     --prompt-length, --response-length, --epochs, --round-prompts, --batch-size, --ttt-length,
 *     --lr, --warmup-ratio, --max-grad-norm, --draft-vocab-size, --aux-layers, --seed, also
 *     --eval-prompts (with --prompts-file it decides which prompts are trained) and
 *     --rollout-workers (it splits each round between the workers), and any setting added later
 *     until it is listed as overridable;
 *   - settings not given come from the stored ones (a setting the stored run predates: its default).
 * A stored key this version does not know is dropped; the run contract check of the resume still
 * guards what it covers (data hash, draft config).
 *
 * A start that fails before its first optimizer step (a bad setting for the target, prompts past
 * the positions, a dataset error) leaves the folder as it found it: `RunFolder.abandon` removes what
 * this attempt created (the folder itself when it made it) and restores what it appended to. Never
 * on `--resume`, never once a step was trained (the run is then resumable), never an earlier run's
 * files. With `--fresh` the earlier run was deleted before the attempt, as asked.
 */
import type { FileLock, FileStore } from '../ports/storage.ts';
import { RUN_CHECKPOINTS_DIR } from '../training/checkpoints/checkpoint-export.ts';
import { loggedTrainSteps, TRAIN_RUN_ID } from '../training/checkpoints/run-checkpoints.ts';
import { lockRunFolder, prepareRunFolder, readJson, RUN_LOCK, RUN_SETTINGS, type FileRoots } from '../training/run/run-plan.ts';
import { COMPLETE_MARKER, latestCheckpoint, parseCheckpointDirName, type CheckpointRef } from '../training/checkpoints/train-checkpoint.ts';
import { crc32 } from '../util/crc32.ts';
import { splitPath } from '../util/paths.ts';
import { openSealedJson, sealJson } from '../util/sealed-json.ts';
import { normalizeConfigKeys, TRAIN_OPTIONS, type TrainFlags } from './train-options.ts';

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
]);

/** What a run folder's handling needs of a run's settings (TrainConfig has it). */
export interface RunFolderConfig {
  out: string;
  resume: boolean;
  fresh: boolean;
  /** A cluster run's Redis (its ledger is there, not in the folder). */
  cluster?: string;
}

const FLAG = new Map(TRAIN_OPTIONS.map((o) => [o.key, o.flag]));
const SETTING_KEYS = new Set(TRAIN_OPTIONS.map((o) => o.key).filter((k) => k !== 'config'));
const SETTINGS_KIND = 'speclab train settings';
/** Keys that say where and how this start runs, never taken from the stored settings. */
const RUN_ONLY: ReadonlySet<string> = new Set(['out', 'resume', 'fresh']);

/** The settings a run in `out` stored, and where from; undefined when it stored none. */
export async function storedRunSettings(
  roots: FileRoots,
  out: string,
): Promise<{ settings: Record<string, unknown>; source: string } | undefined> {
  const checkpoints = roots.files(`${out}/${RUN_CHECKPOINTS_DIR}`);
  const ref = await latestCheckpoint(checkpoints, TRAIN_RUN_ID);
  const fromCheckpoint = ref ? await checkpointSettings(checkpoints, ref) : undefined;
  if (fromCheckpoint) return { settings: fromCheckpoint, source: `${checkpoints.root}/${ref!.dir}/state.json` };
  const dir = roots.files(out);
  if (!(await dir.exists(RUN_SETTINGS))) return undefined;
  const source = `${dir.root}/${RUN_SETTINGS}`;
  const file = openSealedJson(await dir.read(RUN_SETTINGS), source, 'the run settings') as { kind?: unknown; settings?: unknown };
  if (file?.kind !== SETTINGS_KIND || !isObject(file.settings))
    throw new Error(`${source}: not the settings of a speclab train run (expected kind "${SETTINGS_KIND}" and an object of settings)`);
  return { settings: file.settings, source };
}

/** `extra.settings` of a complete checkpoint, its state.json checked against the COMPLETE marker (weights are not read). */
async function checkpointSettings(store: FileStore, ref: CheckpointRef): Promise<Record<string, unknown> | undefined> {
  const where = `${store.root}/${ref.dir}/state.json`;
  const marker = JSON.parse(new TextDecoder().decode(await store.read(`${ref.dir}/${COMPLETE_MARKER}`))) as {
    files?: Record<string, { bytes?: number; crc32?: number }>;
  };
  const bytes = await store.read(`${ref.dir}/state.json`);
  const expect = marker.files?.['state.json'];
  if (bytes.byteLength !== expect?.bytes || crc32(bytes) !== expect?.crc32)
    throw new Error(`${where}: does not match its ${COMPLETE_MARKER} marker (damaged); refusing to read the run's settings from it`);
  const settings = (JSON.parse(new TextDecoder().decode(bytes)) as { extra?: { settings?: unknown } }).extra?.settings;
  return isObject(settings) && Object.keys(settings).length > 0 ? settings : undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The setting keys this command gave: its flags and its `--config` file's keys. */
async function givenKeys(roots: FileRoots, flags: TrainFlags): Promise<Set<string>> {
  const keys = new Set(Object.keys(flags.values).filter((k) => flags.values[k] !== undefined));
  if (flags.configFile)
    for (const k of Object.keys(
      normalizeConfigKeys((await readJson(roots, flags.configFile)) as Record<string, unknown>, flags.configFile),
    ))
      keys.add(k);
  return keys;
}

const shown = (key: string, value: unknown): string =>
  `${FLAG.get(key) ?? key} ${value === undefined ? '(default)' : Array.isArray(value) ? value.join(',') : String(value)}`;
const listed = (items: string[]): string => (items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`);

/**
 * The settings of this start: `config` (this command's, validated) unless it resumes a run that
 * stored its settings; then the stored ones with this command's overridable settings over them,
 * validated by `validate`. Refuses a given setting that shapes the run and differs from the stored one.
 */
export async function withStoredSettings<C extends RunFolderConfig>(
  roots: FileRoots,
  flags: TrainFlags,
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
  const keys = [...(await givenKeys(roots, flags))].filter((k) => SETTING_KEYS.has(k) && !RUN_ONLY.has(k));
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

/** The command that continues an interrupted run: its settings are stored, so only the folder. */
export function resumeCommand(out: string): string {
  const dir = /^[\w./:=,@+-]+$/.test(out) ? out : `'${out.replace(/'/g, "'\\''")}'`;
  return `speclab train --out ${dir} --resume`;
}

/** The run folder this start holds: locked, prepared (resume/fresh/refuse), its settings written. */
export interface RunFolder {
  readonly lock: FileLock;
  /** After a failure: takes back what this attempt created, unless it resumed or trained a step. */
  abandon(): Promise<void>;
  /**
   * The run now exists beyond this folder (a cluster's Redis holds its manifest and ledger): a later
   * failure takes nothing back, so the folder stays for `--resume`, the only start the cluster accepts.
   */
  keep(): void;
  /** Releases the lock (and removes the folder when this attempt made it and took everything back). */
  release(): Promise<void>;
}

/**
 * Locks `config.out`, prepares it (prepareRunFolder), records what it holds now, and writes the
 * sealed settings file (`settings`: the validated settings of the run). On a refusal nothing is
 * left behind: the lock is released and a folder the lock created is removed.
 */
export async function openRunFolder(roots: FileRoots, config: RunFolderConfig, settings: unknown = config): Promise<RunFolder> {
  const [parentPath, name] = splitPath(config.out, { ignoreTrailingSlash: true });
  const parent = roots.files(parentPath);
  const removable = name !== '' && name !== '.' && name !== '..';
  const existed = !removable || (await parent.exists(name));
  const out = roots.files(config.out);
  const lock = await lockRunFolder(out);
  // Set when this attempt took back what it created: the lock's release then removes a folder it made.
  let takenBack = false;
  let kept = false;
  const release = async () => {
    await lock.release();
    if (takenBack && !existed && (await out.list('')).length === 0) await parent.remove(name);
  };
  let before: string[];
  let metricsBytes: number | undefined;
  let oldSettings: Uint8Array | undefined;
  let loggedBefore = 0;
  try {
    await prepareRunFolder(out, config);
    before = await out.list('');
    metricsBytes = before.includes('metrics.jsonl') ? await out.size('metrics.jsonl') : undefined;
    oldSettings = before.includes(RUN_SETTINGS) ? await out.read(RUN_SETTINGS) : undefined;
    loggedBefore = (await loggedTrainSteps(out)).lastStep;
    await out.writeAtomic(RUN_SETTINGS, sealJson({ kind: SETTINGS_KIND, settings: JSON.parse(JSON.stringify(settings)) as unknown }));
  } catch (err) {
    takenBack = true; // only a folder the lock made (now empty) goes
    await release();
    throw err;
  }
  return {
    lock,
    release,
    keep() {
      kept = true;
    },
    async abandon() {
      if (config.resume || takenBack || kept) return;
      const stepFolders = (await out.list(RUN_CHECKPOINTS_DIR)).some((n) => parseCheckpointDirName(n) !== undefined);
      if (stepFolders || (await loggedTrainSteps(out)).lastStep > loggedBefore) return; // a step was trained: the run is resumable
      for (const entry of await out.list('')) if (entry !== RUN_LOCK && !before.includes(entry)) await out.remove(entry);
      if (metricsBytes !== undefined && (await out.size('metrics.jsonl')) > metricsBytes)
        await out.writeAtomic('metrics.jsonl', (await out.read('metrics.jsonl')).subarray(0, metricsBytes));
      if (oldSettings) await out.writeAtomic(RUN_SETTINGS, oldSettings);
      takenBack = true;
    },
  };
}
