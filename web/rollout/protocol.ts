/** Messages between the rollout page (./main.ts) and its Web Worker (./worker.ts). */
import type { TabRolloutEvent } from '../../src/training/cluster/tab-rollout.ts';

export interface JoinCommand {
  readonly type: 'join';
  readonly gateway: string;
  readonly token: string;
  readonly run: string;
  /** The target directory's URL, absolute (the page resolves a relative one against itself). */
  readonly targetUrl: string;
  readonly batch: number;
  readonly workerId?: string;
  /** Test hook: hold the Nth non-empty lease without capturing it (0: never). */
  readonly pauseAfterLease: number;
}

export type WorkerMessage =
  | { readonly type: 'event'; readonly event: TabRolloutEvent }
  | { readonly type: 'held'; readonly taskIds: readonly string[] }
  | { readonly type: 'error'; readonly message: string };
