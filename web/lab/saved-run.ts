/**
 * The browser lab's saved run: `run.json` in the lab's file store, holding the settings, the model id
 * and the total step count that a reloaded tab continues. It decides what the tab trains, so it is
 * sealed JSON (length and CRC-32, src/util/sealed-json.ts): a damaged or malformed file is refused
 * naming it, never continued.
 */
import type { FileStore } from '../../src/ports/storage.ts';
import { openSealedJson, sealJson } from '../../src/util/sealed-json.ts';
import { DEFAULT_SETTINGS, type LabDataRef, type LabSettings } from './protocol.ts';

export const RUN_FILE = 'run.json';

export interface SavedRun {
  settings: LabSettings;
  model: string;
  total: number;
  /** The conversations it trains on (./worker-conversations.ts); absent: the bundled prompts. */
  data?: LabDataRef;
}

/** The saved run in `files`, or undefined when there is none; throws naming the file if it is damaged. */
export async function readSavedRun(files: FileStore): Promise<SavedRun | undefined> {
  if (!(await files.exists(RUN_FILE))) return undefined;
  const source = `${files.root}/${RUN_FILE}`;
  const value = openSealedJson(await files.read(RUN_FILE), source, 'the saved run (settings, model, total steps)') as Partial<SavedRun>;
  const settings = value.settings as Partial<Record<keyof LabSettings, unknown>> | undefined;
  const badSetting = settings && Object.keys(DEFAULT_SETTINGS).find((k) => !Number.isFinite(settings[k as keyof LabSettings]));
  const data = value.data as Partial<Record<keyof LabDataRef, unknown>> | undefined;
  const badData =
    data !== undefined &&
    (typeof data.file !== 'string' || !['bytes', 'crc32', 'heldOut'].every((k) => Number.isInteger(data[k as keyof LabDataRef])));
  if (typeof value.model !== 'string' || !Number.isInteger(value.total) || !settings || badSetting || badData) {
    throw new Error(
      `${source}: the saved run is malformed (${badSetting ? `settings.${badSetting}` : badData ? 'data' : 'model, total or settings'}); refusing to use it`,
    );
  }
  return value as SavedRun;
}

export function writeSavedRun(files: FileStore, run: SavedRun): Promise<void> {
  return files.writeAtomic(RUN_FILE, sealJson(run));
}
