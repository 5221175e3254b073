/**
 * The trainer's side of a round in cluster mode: the session has ingested the round's prompts into
 * the shared prompt ledger, and rollout processes (`speclab rollout`, or a browser tab through the
 * gateway) lease, capture and commit them. This waits until every sample of the round is committed,
 * failing closed when a prompt failed terminally or when nothing was committed for `stallMs`.
 */
import type { DataFlowController } from '../../control/controller.ts';
import type { MetadataStore } from '../../control/metadata-store.ts';

export interface ClusterWaitOptions {
  /** Milliseconds between checks (default 50). */
  readonly pollMs?: number;
  /** Give up when the round gained no commit for this long (default 600 000: ten minutes). */
  readonly stallMs?: number;
  readonly now: () => number;
  readonly onProgress?: (committed: number, total: number) => void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves once each of `sampleIds` (task ids `taskIds`, same order) is committed. */
export async function waitForRoundCommits(
  round: number,
  sampleIds: readonly string[],
  taskIds: readonly string[],
  controller: DataFlowController,
  metadata: MetadataStore,
  options: ClusterWaitOptions,
): Promise<void> {
  const pollMs = options.pollMs ?? 50;
  const stallMs = options.stallMs ?? 600_000;
  let missing = [...sampleIds];
  let lastProgress = options.now();
  const tasks = new Set(taskIds);
  for (;;) {
    const still: string[] = [];
    for (const id of missing) if (!(await metadata.isCommitted(id))) still.push(id);
    if (still.length < missing.length) {
      lastProgress = options.now();
      options.onProgress?.(sampleIds.length - still.length, sampleIds.length);
    }
    missing = still;
    if (missing.length === 0) return;
    const failed = (await controller.promptFailures()).filter((f) => tasks.has(f.taskId));
    if (failed.length > 0) {
      throw new Error(
        `round ${round}: ${failed.length} prompt(s) failed in rollout and will never be committed: ${failed
          .slice(0, 3)
          .map((f) => `${f.taskId}: ${f.reason}`)
          .join('; ')}`,
      );
    }
    if (options.now() - lastProgress > stallMs) {
      const { rolloutWorkers, promptsLeased } = await controller.status();
      throw new Error(
        `round ${round}: ${missing.length} of ${sampleIds.length} samples not committed and none for ${Math.round(stallMs / 1000)} s ` +
          `(${rolloutWorkers} rollout workers registered, ${promptsLeased} prompts leased); is a \`speclab rollout\` of this run running?`,
      );
    }
    await sleep(pollMs);
  }
}
