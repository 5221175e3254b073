/**
 * SampleRefQueue (docs/control-plane.md §4): the metadata-only lease/ack/fail transport between producers
 * (online commits, offline manifests) and the trainer. Lease identity is the sample id.
 *
 * Beyond SpecForge's first runtime design (docs/control-plane.md §8) leases can expire (lazily, on the next `get`), every ref has a
 * bounded number of deliveries, and terminal failures are recorded with their reason instead of
 * vanishing. `partitionKey` selects one of several independent FIFOs (e.g. one per DP rank); refs
 * put without a key live in the default partition and are leased only by a `get` without a key.
 */
import { assertNoTensors } from '../contracts/no-tensors.ts';
import type { SampleRef } from '../contracts/records.ts';
import type { FailOutcome, RefQueue, TerminalFailure } from './control-stores.ts';

export type { FailOutcome, TerminalFailure };

export interface SampleRefQueueOptions {
  /** A lease older than this goes back to the tail of its partition; null = leases never expire. */
  leaseTimeoutMs?: number | null;
  /** Deliveries allowed per ref before a retryable failure or expiry becomes terminal; null = unbounded. */
  maxAttempts?: number | null;
  /** Milliseconds, monotonic; injectable so tests can expire leases without sleeping. */
  clock?: () => number;
}

interface Lease {
  readonly ref: SampleRef;
  readonly partition: string;
  readonly leasedAt: number;
}

const DEFAULT_PARTITION = '';

/** The in-memory RefQueue: one process's queue (the single-process run, and tests). */
export class SampleRefQueue implements RefQueue {
  private readonly partitions = new Map<string, Map<string, SampleRef>>();
  private readonly leased = new Map<string, Lease>();
  /** Deliveries so far per id; forgotten on ack and terminal failure. */
  private readonly attempts = new Map<string, number>();
  private readonly terminal = new Map<string, TerminalFailure>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly leaseTimeoutMs: number | null;
  private readonly maxAttempts: number | null;
  private readonly clock: () => number;

  constructor(options: SampleRefQueueOptions = {}) {
    this.leaseTimeoutMs = positiveOrNull(options.leaseTimeoutMs, 'leaseTimeoutMs');
    this.maxAttempts = positiveOrNull(options.maxAttempts, 'maxAttempts');
    if (this.maxAttempts !== null && !Number.isInteger(this.maxAttempts)) {
      throw new RangeError(`SampleRefQueue: maxAttempts must be an integer, got ${this.maxAttempts}`);
    }
    this.clock = options.clock ?? (() => performance.now());
  }

  /**
   * Appends refs to the partition's FIFO, skipping ids already pending or leased anywhere
   * (at-least-once producers may deliver twice). Returns the ids actually enqueued.
   */
  async put(refs: readonly SampleRef[], options: { partitionKey?: string } = {}): Promise<string[]> {
    refs.forEach((ref, i) => assertNoTensors(ref, `SampleRefQueue.put refs[${i}]`));
    const partition = options.partitionKey ?? DEFAULT_PARTITION;
    const added: string[] = [];
    for (const ref of refs) {
      if (this.isPending(ref.sampleId) || this.leased.has(ref.sampleId)) continue;
      this.terminal.delete(ref.sampleId);
      this.fifo(partition).set(ref.sampleId, ref);
      added.push(ref.sampleId);
    }
    if (added.length > 0) this.wake(partition);
    return added;
  }

  /**
   * Leases up to `maxRefs` refs in FIFO order from one partition, returning as soon as any are
   * pending (it never waits to fill a batch). With nothing pending: `timeoutMs` undefined returns
   * [] at once; otherwise waits up to `timeoutMs` for a put.
   */
  async get(maxRefs: number, timeoutMs?: number, options: { partitionKey?: string } = {}): Promise<SampleRef[]> {
    if (!Number.isInteger(maxRefs) || maxRefs < 0)
      throw new RangeError(`SampleRefQueue.get: maxRefs must be a non-negative integer, got ${maxRefs}`);
    if (timeoutMs !== undefined && !(timeoutMs >= 0)) throw new RangeError(`SampleRefQueue.get: timeoutMs must be ≥ 0, got ${timeoutMs}`);
    const partition = options.partitionKey ?? DEFAULT_PARTITION;
    const deadline = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
    for (;;) {
      this.reclaimExpired();
      const leased = this.leaseFrom(partition, maxRefs);
      if (leased.length > 0 || maxRefs === 0 || deadline === undefined) return leased;
      const remaining = deadline - performance.now();
      if (remaining <= 0) return [];
      await this.waitForPut(partition, remaining);
    }
  }

  /** Releases leases for good (the caller recorded the durable ack first). Unknown ids are a no-op. */
  async ack(refs: readonly SampleRef[]): Promise<number> {
    let released = 0;
    for (const ref of refs) {
      if (this.leased.delete(ref.sampleId)) {
        this.attempts.delete(ref.sampleId);
        released++;
      }
    }
    return released;
  }

  /**
   * Ends leases that failed. Retryable → tail of the ref's partition, unless its deliveries are
   * exhausted; terminal → recorded with the reason. Refs not currently leased are ignored.
   */
  async fail(refs: readonly SampleRef[], reason: string, retryable: boolean): Promise<FailOutcome> {
    if (typeof reason !== 'string') throw new TypeError('SampleRefQueue.fail: reason must be a string');
    const requeued: string[] = [];
    const terminal: string[] = [];
    for (const ref of refs) {
      const lease = this.leased.get(ref.sampleId);
      if (lease === undefined) continue;
      this.leased.delete(ref.sampleId);
      if (this.requeueOrRetire(lease, reason, retryable)) requeued.push(ref.sampleId);
      else terminal.push(ref.sampleId);
    }
    return { requeued, terminal };
  }

  /** Pending refs: in one partition, or in all when no key is given. */
  async depth(partitionKey?: string): Promise<number> {
    if (partitionKey !== undefined) return this.partitions.get(partitionKey)?.size ?? 0;
    let n = 0;
    for (const fifo of this.partitions.values()) n += fifo.size;
    return n;
  }

  /** Leased refs: in one partition, or in all when no key is given. */
  async inFlight(partitionKey?: string): Promise<number> {
    if (partitionKey === undefined) return this.leased.size;
    let n = 0;
    for (const lease of this.leased.values()) if (lease.partition === partitionKey) n++;
    return n;
  }

  async isLeased(sampleId: string): Promise<boolean> {
    return this.leased.has(sampleId);
  }

  /** Terminal failures in the order they happened (tensor-free: id, reason, deliveries). */
  async terminalFailures(): Promise<TerminalFailure[]> {
    return [...this.terminal.values()];
  }

  async clear(): Promise<void> {
    this.partitions.clear();
    this.leased.clear();
    this.attempts.clear();
  }

  private leaseFrom(partition: string, maxRefs: number): SampleRef[] {
    const fifo = this.partitions.get(partition);
    const out: SampleRef[] = [];
    if (fifo === undefined) return out;
    const now = this.clock();
    for (const [id, ref] of fifo) {
      if (out.length >= maxRefs) break;
      fifo.delete(id);
      this.leased.set(id, { ref, partition, leasedAt: now });
      this.attempts.set(id, (this.attempts.get(id) ?? 0) + 1);
      out.push(ref);
    }
    return out;
  }

  private reclaimExpired(): void {
    if (this.leaseTimeoutMs === null) return;
    const now = this.clock();
    for (const [id, lease] of [...this.leased]) {
      if (now - lease.leasedAt < this.leaseTimeoutMs) continue;
      this.leased.delete(id);
      this.requeueOrRetire(lease, `lease expired after ${this.leaseTimeoutMs} ms`, true);
    }
  }

  /** True when requeued; false when retired as terminal. */
  private requeueOrRetire(lease: Lease, reason: string, retryable: boolean): boolean {
    const id = lease.ref.sampleId;
    const attempts = this.attempts.get(id) ?? 0;
    const exhausted = this.maxAttempts !== null && attempts >= this.maxAttempts;
    if (retryable && !exhausted) {
      this.fifo(lease.partition).set(id, lease.ref);
      this.wake(lease.partition);
      return true;
    }
    this.attempts.delete(id);
    const why = retryable ? `${reason} (attempts exhausted: ${attempts})` : reason;
    this.terminal.set(id, Object.freeze({ sampleId: id, reason: why, attempts }));
    return false;
  }

  private isPending(id: string): boolean {
    for (const fifo of this.partitions.values()) if (fifo.has(id)) return true;
    return false;
  }

  private fifo(partition: string): Map<string, SampleRef> {
    let fifo = this.partitions.get(partition);
    if (fifo === undefined) {
      fifo = new Map();
      this.partitions.set(partition, fifo);
    }
    return fifo;
  }

  private wake(partition: string): void {
    const set = this.waiters.get(partition);
    if (set === undefined) return;
    this.waiters.delete(partition);
    for (const resolve of set) resolve();
  }

  /** Resolves on the next put into `partition` or after `ms`, whichever is first. */
  private waitForPut(partition: string, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let set = this.waiters.get(partition);
      if (set === undefined) {
        set = new Set();
        this.waiters.set(partition, set);
      }
      const waiters = set;
      const done = (): void => {
        clearTimeout(timer);
        waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      waiters.add(done);
    });
  }
}

function positiveOrNull(value: number | null | undefined, name: string): number | null {
  if (value === undefined || value === null) return null;
  if (!(value > 0) || !Number.isFinite(value))
    throw new RangeError(`SampleRefQueue: ${name} must be a positive number or null, got ${value}`);
  return value;
}
