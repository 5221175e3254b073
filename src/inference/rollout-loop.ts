/**
 * A rollout process's main loop (`speclab rollout --cluster …`): lease prompts from the run's shared
 * ledger, capture and commit them (RolloutWorker.runOnce), and when there is nothing to lease, wait
 * and ask again, until the trainer says the run is finished or the caller stops it. Prompts arrive
 * one round at a time, as the trainer ingests them; this loop never waits inside a lease, so a
 * stop request is seen within one poll.
 */
import type { RolloutWorker } from './rollout-worker.ts';

export interface RolloutLoopOptions {
  /** Prompts leased per capture (one batched forward over them, packed by the feature source). */
  readonly batch: number;
  /** Milliseconds to wait when nothing is leasable (default 50). */
  readonly pollMs?: number;
  /** True once the trainer finished the run. */
  readonly finished: () => Promise<boolean>;
  /** True to stop now (a signal); checked between captures. */
  readonly stopped?: () => boolean;
  readonly onCommit?: (samples: number) => void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Runs until the run is finished (or stopped); returns the samples this worker committed. */
export async function runRolloutLoop(worker: RolloutWorker, options: RolloutLoopOptions): Promise<number> {
  let committed = 0;
  while (!options.stopped?.()) {
    const refs = await worker.runOnce(options.batch);
    if (refs.length > 0) {
      committed += refs.length;
      options.onCommit?.(refs.length);
      continue;
    }
    if (await options.finished()) break;
    await sleep(options.pollMs ?? 50);
  }
  return committed;
}
