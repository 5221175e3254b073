/**
 * TrainLease (docs/control-plane.md §5): the loader-facing queue shape, and the trainer's only way to the
 * SampleRefQueue. Every get/ack/fail goes through the controller, so an ack always records the
 * durable transaction before a lease is released, and a cross-process trainer is a drop-in
 * replacement for the controller behind this interface.
 */
import type { SampleRef } from '../contracts/records.ts';
import type { FailOutcome } from './sample-ref-queue.ts';

/** The controller endpoints a TrainLease routes to (DataFlowController implements them). */
export interface TrainEndpoints {
  leaseTrainRefs(trainerId: string, maxRefs: number, timeoutMs?: number, options?: { partitionKey?: string }): Promise<SampleRef[]>;
  ackTrainRefs(
    trainerId: string,
    sampleIds: readonly string[],
    ack?: { globalStep?: number | null; optimizerDurable?: boolean },
  ): Promise<{ released: number }>;
  failRefs(ownerId: string, sampleIds: readonly string[], reason: string, retryable: boolean): Promise<FailOutcome>;
}

export class TrainLease {
  constructor(
    private readonly controller: TrainEndpoints,
    readonly trainerId: string,
    /** The queue partition this trainer consumes (e.g. its DP rank); undefined = default partition. */
    readonly partitionKey?: string,
  ) {}

  /** Leases up to `maxRefs` refs; waits up to `timeoutMs` when none are pending (undefined = no wait). */
  get(maxRefs: number, timeoutMs?: number): Promise<SampleRef[]> {
    return this.controller.leaseTrainRefs(this.trainerId, maxRefs, timeoutMs, { partitionKey: this.partitionKey });
  }

  /** Call at the optimizer-step boundary with the refs the step consumed. */
  ack(refs: readonly SampleRef[], ack: { globalStep?: number | null; optimizerDurable?: boolean } = {}): Promise<{ released: number }> {
    return this.controller.ackTrainRefs(
      this.trainerId,
      refs.map((r) => r.sampleId),
      ack,
    );
  }

  fail(refs: readonly SampleRef[], reason: string, retryable: boolean): Promise<FailOutcome> {
    return this.controller.failRefs(
      this.trainerId,
      refs.map((r) => r.sampleId),
      reason,
      retryable,
    );
  }
}
