/** What earlier processes of a `speclab train` run (online or `--offline`) wrote to its metrics log (read on resume). */
import { TrainFields } from '../../contracts/metrics-record.ts';
import type { FileStore } from '../../ports/storage.ts';

/** The train record's step and loss: all a resume reads (a record without its loss reads NaN). */
const LoggedStep = TrainFields.pick({ phase: true, step: true }).extend({ loss: TrainFields.shape.loss.optional() }).loose();

/** The last train step an earlier process of this run logged, and its loss (none: 0 and NaN). */
export async function loggedSteps(out: FileStore): Promise<{ lastStep: number; lastLoss: number }> {
  let lastStep = 0;
  let lastLoss = Number.NaN;
  if (!(await out.exists('metrics.jsonl'))) return { lastStep, lastLoss };
  for (const line of new TextDecoder().decode(await out.read('metrics.jsonl')).split('\n')) {
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      continue; // a line cut by a kill mid-append
    }
    const train = LoggedStep.safeParse(entry);
    if (train.success && train.data.step >= lastStep) {
      lastStep = train.data.step;
      lastLoss = train.data.loss ?? Number.NaN;
    }
  }
  return { lastStep, lastLoss };
}
