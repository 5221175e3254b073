/**
 * The run folder (`--out`) one start of `speclab train` holds, and the settings stored in it.
 *
 * `lockRunFolder` locks it before anything in it is read or deleted; `prepareRunFolder` continues an
 * earlier run (`--resume`), deletes it (`--fresh`) or refuses; `openRunFolder` does both, records
 * what the folder holds and writes the sealed settings file `settings.json`. `storedRunSettings`
 * reads what a resumed run stored: the `extra.settings` of its latest complete checkpoint (written
 * by eagle3RunExtras), else `settings.json`. Which stored settings a resume may change is the rule of
 * src/cli/run-settings.ts (it compares the flags given).
 *
 * A start that fails before its first optimizer step (a bad setting for the target, prompts past
 * the positions, a dataset error) leaves the folder as it found it: `RunFolder.abandon` removes what
 * this attempt created (the folder itself when it made it) and restores what it appended to. Never
 * on `--resume`, never once a step was trained (the run is then resumable), never an earlier run's
 * files. With `--fresh` the earlier run was deleted before the attempt, as asked.
 */
import type { FileLock, FileStore } from '../../ports/storage.ts';
import { RUN_CHECKPOINTS_DIR } from '../checkpoints/checkpoint-export.ts';
import { TRAIN_RUN_ID } from '../checkpoints/run-checkpoints.ts';
import { loggedSteps } from './train-log.ts';
import { COMPLETE_MARKER, latestCheckpoint, parseCheckpointDirName, type CheckpointRef } from '../checkpoints/train-checkpoint.ts';
import { speclabCommand } from '../../util/cli-command.ts';
import { crc32 } from '../../util/crc32.ts';
import { splitPath } from '../../util/paths.ts';
import { openSealedJson, sealJson } from '../../util/sealed-json.ts';
import type { FileRoots } from './run-plan.ts';
import { READ_BUDGETS } from '../../ports/read-budget.ts';

/** Run state of an earlier run in --out: continued with --resume, deleted with --fresh, else refused. */
const RUN_STATE = ['metadata', 'checkpoints', 'spill'] as const;

/**
 * Locks the run folder for this process (`LOCK`; a dead owner's lock is taken over), before
 * anything in it is read or deleted: two trainers on one folder would corrupt each other's ledger
 * and spill. Stores that cannot lock (a browser tab's IndexedDB) return a no-op lock.
 */
export async function lockRunFolder(out: FileStore): Promise<FileLock> {
  if (!out.lockExclusive) return { path: `${out.root}/${RUN_LOCK}`, release: async () => {} };
  return out.lockExclusive(RUN_LOCK);
}

export const RUN_LOCK = 'LOCK';

/**
 * The run's settings, sealed (src/util/sealed-json.ts): written at start, read by `--resume`
 * (storedRunSettings below; src/training/run/run-settings.ts).
 */
export const RUN_SETTINGS = 'settings.json';

export async function prepareRunFolder(out: FileStore, config: { resume: boolean; fresh: boolean; cluster?: string }): Promise<void> {
  if (config.resume && config.fresh) throw new Error('--resume and --fresh contradict each other: pick one');
  const present: string[] = [];
  for (const name of RUN_STATE) if ((await out.list(name)).length > 0) present.push(name);
  if (config.fresh) {
    // remove() takes a file or a folder; a store that has no folders (IndexedDB) says a folder does
    // not exist, so remove unconditionally (it is a no-op for a missing name).
    for (const name of [...RUN_STATE, RUN_SETTINGS, 'metrics.jsonl', 'summary.json', 'draft']) await out.remove(name);
    return;
  }
  // A cluster run keeps its ledger in Redis: before its first checkpoint, its folder holds only its settings.
  if (config.cluster !== undefined && (await out.exists(RUN_SETTINGS))) present.push(RUN_SETTINGS);
  if (config.resume && present.length === 0)
    throw new Error(`--resume: ${out.root} holds no run to resume (no ${RUN_STATE.join('/, ')}/); start one without --resume`);
  if (!config.resume && present.length > 0) {
    throw new Error(
      `${out.root} already holds a run (${present.map((p) => `${p}/`).join(', ')}): pass --resume to continue it from its last checkpoint, --fresh to delete it and start over, or another --out`,
    );
  }
}

/** What a run folder's handling needs of a run's settings (TrainConfig has it). */
export interface RunFolderConfig {
  out: string;
  resume: boolean;
  fresh: boolean;
  /** A cluster run's Redis (its ledger is there, not in the folder). */
  cluster?: string;
}

const SETTINGS_KIND = 'speclab train settings';

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
  const file = openSealedJson(await dir.read(RUN_SETTINGS, READ_BUDGETS.config), source, 'the run settings') as {
    kind?: unknown;
    settings?: unknown;
  };
  if (file?.kind !== SETTINGS_KIND || !isObject(file.settings))
    throw new Error(`${source}: not the settings of a speclab train run (expected kind "${SETTINGS_KIND}" and an object of settings)`);
  return { settings: file.settings, source };
}

/** `extra.settings` of a complete checkpoint, its state.json checked against the COMPLETE marker (weights are not read). */
async function checkpointSettings(store: FileStore, ref: CheckpointRef): Promise<Record<string, unknown> | undefined> {
  const where = `${store.root}/${ref.dir}/state.json`;
  const marker = JSON.parse(new TextDecoder().decode(await store.read(`${ref.dir}/${COMPLETE_MARKER}`, READ_BUDGETS.config))) as {
    files?: Record<string, { bytes?: number; crc32?: number }>;
  };
  const bytes = await store.read(`${ref.dir}/state.json`, READ_BUDGETS.config);
  const expect = marker.files?.['state.json'];
  if (bytes.byteLength !== expect?.bytes || crc32(bytes) !== expect?.crc32)
    throw new Error(`${where}: does not match its ${COMPLETE_MARKER} marker (damaged); refusing to read the run's settings from it`);
  const settings = (JSON.parse(new TextDecoder().decode(bytes)) as { extra?: { settings?: unknown } }).extra?.settings;
  return isObject(settings) && Object.keys(settings).length > 0 ? settings : undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The command that continues an interrupted run (runnable from a clone): its settings are stored, so only the folder. */
export function resumeCommand(out: string): string {
  const dir = /^[\w./:=,@+-]+$/.test(out) ? out : `'${out.replace(/'/g, "'\\''")}'`;
  return speclabCommand(`train --out ${dir} --resume`);
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
    loggedBefore = (await loggedSteps(out)).lastStep;
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
      if (stepFolders || (await loggedSteps(out)).lastStep > loggedBefore) return; // a step was trained: the run is resumable
      for (const entry of await out.list('')) if (entry !== RUN_LOCK && !before.includes(entry)) await out.remove(entry);
      if (metricsBytes !== undefined && (await out.size('metrics.jsonl')) > metricsBytes)
        await out.writeAtomic('metrics.jsonl', (await out.read('metrics.jsonl')).subarray(0, metricsBytes));
      if (oldSettings) await out.writeAtomic(RUN_SETTINGS, oldSettings);
      takenBack = true;
    },
  };
}
