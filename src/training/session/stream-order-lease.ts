/**
 * The trainer's lease in cluster mode: it hands refs out in the run's stream order, whatever order
 * rollout processes committed them in. Rollout processes race, so the queue holds a round's refs
 * in commit order; this lease takes every queued ref at once (the session ingests one round at a
 * time and waits for all of it before training, so that is exactly the round) and sorts them by
 * their position in the seeded stream. One trainer fed by any number of rollout processes then
 * trains on the batches of the single-process run, where workers commit in stream order.
 *
 * Refs it holds stay leased in the queue until acked; a trainer that dies holding them leaves
 * committed, unacked refs that reconcileOnRestart requeues, so nothing is lost.
 */
import type { SampleRef } from '../../contracts/records.ts';
import type { RefQueue } from '../../control/control-stores.ts';
import type { TrainLease } from '../../control/train-lease.ts';
import type { RefLease } from '../../data/feature-dataloader.ts';

export class StreamOrderLease implements RefLease {
  private buffer: SampleRef[] = [];

  constructor(
    private readonly lease: TrainLease,
    private readonly queue: RefQueue,
    /** Sample id → its position in the run's stream (every round, in order). */
    private readonly rank: ReadonlyMap<string, number>,
  ) {}

  /** Refs handed out in stream order; the first call of a round leases all of it. */
  async get(maxRefs: number, timeoutMs?: number): Promise<SampleRef[]> {
    if (this.buffer.length === 0) {
      const queued = await this.queue.depth(this.lease.partitionKey);
      const all = await this.lease.get(Math.max(maxRefs, queued), timeoutMs);
      const unknown = all.filter((r) => !this.rank.has(r.sampleId));
      if (unknown.length > 0) {
        // A ref outside the stream (another run's, or a stream built from other settings) must not be trained on.
        await this.lease.fail(unknown, "not a sample of this run's stream", false);
        throw new Error(
          `cluster trainer: ${unknown.length} queued sample(s) are not in this run's stream (${unknown
            .slice(0, 3)
            .map((r) => r.sampleId)
            .join(', ')}); were they committed by a rollout of another run or other settings?`,
        );
      }
      this.buffer = all.sort((a, b) => this.rank.get(a.sampleId)! - this.rank.get(b.sampleId)!);
    }
    return this.buffer.splice(0, maxRefs);
  }

  /** Refs leased but not yet handed out (they count as queued for the session). */
  get held(): number {
    return this.buffer.length;
  }

  ack(refs: readonly SampleRef[], ack: { globalStep?: number | null; optimizerDurable?: boolean } = {}): Promise<{ released: number }> {
    return this.lease.ack(refs, ack);
  }

  fail(refs: readonly SampleRef[], reason: string, retryable: boolean): Promise<unknown> {
    return this.lease.fail(refs, reason, retryable);
  }
}
