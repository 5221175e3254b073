/**
 * The controller's prompt-task book (docs/control-plane.md §3):
 *
 *   ingested → pending ──lease──▶ leased(worker) ──commit / complete──▶ done (record dropped)
 *                 ▲                    │
 *                 └── retryable fail, ─┤  (attempt + 1; terminal once maxPromptAttempts is reached)
 *                     lease expiry     └──terminal fail──▶ failed(reason)
 *
 * Only the worker holding a lease may fail or complete it. Leases expire (injectable clock) so a
 * dead worker cannot strand prompts, and attempts are bounded so a poisoned prompt cannot pin the
 * pool (SpecForge's later runtime's fixes, adopted from day one, docs/control-plane.md §8).
 */
import { makePromptTask, type PromptTask } from '../contracts/records.ts';
import type { CommittedTask, PromptCounts, PromptFailOutcome, PromptFailure, PromptLedger } from './control-stores.ts';

export type { PromptFailOutcome, PromptFailure };

export interface PromptBookOptions {
  clock: () => number;
  /** null = prompt leases never expire. */
  leaseTimeoutMs: number | null;
  /** null = unbounded retries. A retryable failure requeues only while attempt + 1 < this. */
  maxAttempts: number | null;
  /** null = no per-worker cap on prompts held at once. */
  maxLeasePerWorker: number | null;
}

interface PromptLease {
  readonly workerId: string;
  readonly leasedAt: number;
}

/** The in-memory PromptLedger: one process's prompt book (the single-process run, and tests). */
export class PromptBook implements PromptLedger {
  private readonly tasks = new Map<string, PromptTask>();
  /** Insertion-ordered set used as a FIFO of task ids. */
  private readonly pending = new Set<string>();
  private readonly leases = new Map<string, PromptLease>();
  private readonly failures = new Map<string, PromptFailure>();
  private completed = 0;

  constructor(private readonly options: PromptBookOptions) {}

  /** Adds tasks to the tail. A task id already pending or leased is left as it is (idempotent ingest). */
  async add(tasks: readonly PromptTask[]): Promise<void> {
    for (const task of tasks) {
      if (this.pending.has(task.taskId) || this.leases.has(task.taskId)) continue;
      this.failures.delete(task.taskId);
      this.tasks.set(task.taskId, task);
      this.pending.add(task.taskId);
    }
  }

  async lease(workerId: string, maxTasks: number): Promise<PromptTask[]> {
    this.reclaimExpired();
    let n = maxTasks;
    if (this.options.maxLeasePerWorker !== null) n = Math.min(n, this.options.maxLeasePerWorker - this.heldBy(workerId));
    const out: PromptTask[] = [];
    const now = this.options.clock();
    for (const id of this.pending) {
      if (out.length >= n) break;
      this.pending.delete(id);
      this.leases.set(id, { workerId, leasedAt: now });
      out.push(this.tasks.get(id)!);
    }
    return out;
  }

  async fail(workerId: string, taskIds: readonly string[], reason: string, retryable: boolean): Promise<PromptFailOutcome> {
    const requeued: string[] = [];
    const failed: string[] = [];
    const skipped: string[] = [];
    for (const id of taskIds) {
      if (this.leases.get(id)?.workerId !== workerId) {
        skipped.push(id);
        continue;
      }
      this.leases.delete(id);
      (this.retryOrRetire(id, reason, retryable) ? requeued : failed).push(id);
    }
    return { requeued, failed, skipped };
  }

  /** Retires leased tasks that finished without a ref of their own (e.g. a peer TP rank's capture). */
  async complete(workerId: string, taskIds: readonly string[]): Promise<string[]> {
    return taskIds.filter((id) => this.leases.get(id)?.workerId === workerId && this.retire(id));
  }

  /**
   * A ref for the task was committed. A fresh ref finishes the task whoever holds it (even after its
   * lease expired and it went back to pending); a duplicate only ends the committing worker's lease.
   */
  async committed(workerId: string, tasks: readonly CommittedTask[]): Promise<void> {
    for (const { taskId, fresh } of tasks) {
      if (!this.tasks.has(taskId)) continue;
      if (fresh || this.leases.get(taskId)?.workerId === workerId) this.retire(taskId);
    }
  }

  async failuresList(): Promise<PromptFailure[]> {
    return [...this.failures.values()];
  }

  async counts(): Promise<PromptCounts> {
    return {
      prompts: this.tasks.size,
      pending: this.pending.size,
      leased: this.leases.size,
      failed: this.failures.size,
      completed: this.completed,
    };
  }

  async task(taskId: string): Promise<PromptTask | undefined> {
    return this.tasks.get(taskId);
  }

  private retire(taskId: string): boolean {
    this.leases.delete(taskId);
    this.pending.delete(taskId);
    this.tasks.delete(taskId);
    this.completed++;
    return true;
  }

  /** True when requeued with attempt + 1; false when recorded as a terminal failure (record dropped). */
  private retryOrRetire(taskId: string, reason: string, retryable: boolean): boolean {
    const task = this.tasks.get(taskId)!;
    const max = this.options.maxAttempts;
    if (retryable && (max === null || task.attempt + 1 < max)) {
      this.tasks.set(taskId, makePromptTask({ ...task, attempt: task.attempt + 1 }));
      this.pending.add(taskId);
      return true;
    }
    this.tasks.delete(taskId);
    const why = retryable ? `${reason} (attempts exhausted: ${task.attempt + 1})` : reason;
    this.failures.set(taskId, Object.freeze({ taskId, reason: why, attempt: task.attempt }));
    return false;
  }

  private reclaimExpired(): void {
    const timeout = this.options.leaseTimeoutMs;
    if (timeout === null) return;
    const now = this.options.clock();
    for (const [id, lease] of [...this.leases]) {
      if (now - lease.leasedAt < timeout) continue;
      this.leases.delete(id);
      this.retryOrRetire(id, `prompt lease of worker ${lease.workerId} expired after ${timeout} ms`, true);
    }
  }

  private heldBy(workerId: string): number {
    let n = 0;
    for (const lease of this.leases.values()) if (lease.workerId === workerId) n++;
    return n;
  }
}
