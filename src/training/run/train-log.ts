/** What earlier processes of a `speclab train` run wrote to its metrics log (read on resume). */
import type { FileStore } from '../../ports/storage.ts';

/** The last train step an earlier process of this run logged, and its loss (none: 0 and NaN). */
export async function loggedSteps(out: FileStore): Promise<{ lastStep: number; lastLoss: number }> {
  let lastStep = 0;
  let lastLoss = Number.NaN;
  if (!(await out.exists('metrics.jsonl'))) return { lastStep, lastLoss };
  for (const line of new TextDecoder().decode(await out.read('metrics.jsonl')).split('\n')) {
    let entry: { phase?: unknown; step?: unknown; loss?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue; // a line cut by a kill mid-append
    }
    if (entry.phase === 'train' && typeof entry.step === 'number' && entry.step >= lastStep) {
      lastStep = entry.step;
      lastLoss = typeof entry.loss === 'number' ? entry.loss : Number.NaN;
    }
  }
  return { lastStep, lastLoss };
}
