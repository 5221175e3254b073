/**
 * The saved run's per-step metrics: `metrics.json` beside run.json in the lab's file store, written
 * at every checkpoint (and when the run pauses, stops or ends), so a reloaded tab redraws its charts
 * up to the step it continues from. Sealed JSON like run.json: a damaged file is refused naming it.
 */
import type { FileStore } from '../../src/ports/storage.ts';
import { openSealedJson, sealJson } from '../../src/util/sealed-json.ts';
import type { MetricPoint } from './metrics.ts';

export const METRICS_FILE = 'metrics.json';

/** The saved points up to and including step `upTo` (none saved: []); throws naming the file if damaged. */
export async function readRunMetrics(files: FileStore, upTo: number): Promise<MetricPoint[]> {
  if (!(await files.exists(METRICS_FILE))) return [];
  const source = `${files.root}/${METRICS_FILE}`;
  const value = openSealedJson(await files.read(METRICS_FILE), source, "the saved run's per-step metrics") as { points?: unknown };
  if (!Array.isArray(value.points)) throw new Error(`${source}: no "points" array; refusing to use it`);
  return (value.points as MetricPoint[]).filter((p) => typeof p?.step?.step === 'number' && p.step.step <= upTo);
}

export function writeRunMetrics(files: FileStore, points: readonly MetricPoint[]): Promise<void> {
  return files.writeAtomic(METRICS_FILE, sealJson({ points }));
}
