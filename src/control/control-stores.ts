/**
 * The shared state behind a DataFlowController (docs/control-plane.md §9), as four async
 * interfaces: the MetadataStore (commit dedup, the durable ack marker), the RefQueue (train-ref
 * leases), the PromptLedger (prompt-task leases) and the MemberRegistry (rollout workers and
 * trainers). The controller holds no other state, so a controller in each process over the same
 * stores (Redis) is the multi-process control plane, and one process over in-memory stores is the
 * single-process one. Every method is async so a backend may be in this process or across a socket.
 */
import type { PromptTask, SampleRef } from '../contracts/records.ts';
import type { MetadataStore } from './metadata-store.ts';

export interface TerminalFailure {
  readonly sampleId: string;
  readonly reason: string;
  readonly attempts: number;
}

export interface FailOutcome {
  readonly requeued: readonly string[];
  readonly terminal: readonly string[];
}

/**
 * Train-ref leases (docs/control-plane.md §4). Lease identity is the sample id. Leases expire
 * (lazily, on the next `get`), deliveries per ref are bounded, terminal failures are kept with
 * their reason. `partitionKey` selects one of several independent FIFOs; refs put without a key
 * live in the default partition and are leased only by a `get` without a key.
 */
export interface RefQueue {
  /**
   * Appends refs to the partition's FIFO, skipping ids already pending or leased anywhere
   * (at-least-once producers may deliver twice). Returns the ids actually enqueued.
   */
  put(refs: readonly SampleRef[], options?: { partitionKey?: string }): Promise<string[]>;
  /**
   * Leases up to `maxRefs` refs in FIFO order from one partition, returning as soon as any are
   * pending. With nothing pending: `timeoutMs` undefined returns [] at once; otherwise waits up to
   * `timeoutMs` for a put.
   */
  get(maxRefs: number, timeoutMs?: number, options?: { partitionKey?: string }): Promise<SampleRef[]>;
  /** Releases leases for good (the caller recorded the durable ack first). Unknown ids are a no-op. Returns how many were released. */
  ack(refs: readonly SampleRef[]): Promise<number>;
  /** Retryable → tail of the ref's partition unless its deliveries are exhausted; else terminal. Refs not leased are ignored. */
  fail(refs: readonly SampleRef[], reason: string, retryable: boolean): Promise<FailOutcome>;
  /** Pending refs: in one partition, or in all when no key is given. */
  depth(partitionKey?: string): Promise<number>;
  /** Leased refs: in one partition, or in all when no key is given. */
  inFlight(partitionKey?: string): Promise<number>;
  isLeased(sampleId: string): Promise<boolean>;
  /** Terminal failures in the order they happened. */
  terminalFailures(): Promise<TerminalFailure[]>;
  /**
   * Drops every pending and leased ref (terminal failures are kept). A restarted trainer calls it
   * before reconcileOnRestart rebuilds the queue from the ledger: a shared queue outlives the
   * trainer, and the leases a dead trainer held would otherwise keep its refs from being requeued.
   * Only for a run with one trainer: another live trainer's leases would be dropped too.
   */
  clear(): Promise<void>;
}

export interface PromptFailure {
  readonly taskId: string;
  readonly reason: string;
  /** The attempt number that failed (0-based). */
  readonly attempt: number;
}

export interface PromptFailOutcome {
  readonly requeued: readonly string[];
  readonly failed: readonly string[];
  /** Unknown ids and ids leased by someone else (ownership check). */
  readonly skipped: readonly string[];
}

export interface CommittedTask {
  readonly taskId: string;
  /** Whether the commit of its ref was fresh (not a duplicate). */
  readonly fresh: boolean;
}

export interface PromptCounts {
  /** Tasks pending or leased (not yet done or failed). */
  prompts: number;
  pending: number;
  leased: number;
  failed: number;
  completed: number;
}

/**
 * The prompt-task book (docs/control-plane.md §3):
 *
 *   ingested → pending ──lease──▶ leased(worker) ──commit / complete──▶ done (record dropped)
 *                 ▲                    │
 *                 └── retryable fail, ─┤  (attempt + 1; terminal once maxAttempts is reached)
 *                     lease expiry     └──terminal fail──▶ failed(reason)
 *
 * Only the worker holding a lease may fail or complete it. Leases expire, attempts are bounded,
 * and a per-worker cap bounds what one worker holds.
 */
export interface PromptLedger {
  /** Adds tasks to the tail. A task id already pending or leased is left as it is (idempotent ingest). */
  add(tasks: readonly PromptTask[]): Promise<void>;
  lease(workerId: string, maxTasks: number): Promise<PromptTask[]>;
  fail(workerId: string, taskIds: readonly string[], reason: string, retryable: boolean): Promise<PromptFailOutcome>;
  /** Retires leased tasks that finished without a ref of their own (e.g. a peer TP rank's capture). */
  complete(workerId: string, taskIds: readonly string[]): Promise<string[]>;
  /**
   * Refs for these tasks were committed (one call per commit batch). A fresh ref finishes its task
   * whoever holds it (even after its lease expired and it went back to pending); a duplicate only
   * ends the committing worker's lease. Unknown task ids are ignored.
   */
  committed(workerId: string, tasks: readonly CommittedTask[]): Promise<void>;
  failuresList(): Promise<PromptFailure[]>;
  counts(): Promise<PromptCounts>;
  task(taskId: string): Promise<PromptTask | undefined>;
}

export type MemberKind = 'rollout' | 'trainer';

/** Rollout workers and trainers known to the run, across every process that shares the stores. */
export interface MemberRegistry {
  /** Records (or overwrites) a member's JSON info under its id. */
  register(kind: MemberKind, id: string, info: Readonly<Record<string, unknown>>): Promise<void>;
  has(kind: MemberKind, id: string): Promise<boolean>;
  count(kind: MemberKind): Promise<number>;
}

/** Everything a DataFlowController is built over. */
export interface ControlStores {
  readonly metadata: MetadataStore;
  readonly queue: RefQueue;
  readonly prompts: PromptLedger;
  readonly members: MemberRegistry;
}
