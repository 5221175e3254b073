/**
 * In-process backend: partition state in plain maps, cell bytes in a `ColumnStore`.
 *
 * Atomicity comes from JavaScript's run-to-completion: every state change (commit of a put, a
 * claim's scan-and-mark, a clear) happens in one synchronous stretch with no `await` inside, so
 * no other call can observe or interleave with half of it. The only asynchronous part of a put,
 * making the store's copies, happens before the commit and touches no shared state.
 */
import type { Backend, ClaimAttempt, ClaimRequest, PutRequest, RegisterMode, SettleAction } from './client.ts';
import { rowBytes, type ColumnStore } from './column-store.ts';
import type { TagValue } from './meta.ts';
import { checkName } from './names.ts';
import { DataPlaneError, listIds, type DType, type PartitionStats, type RowValue } from './types.ts';

interface Lease {
  readonly leaseId: string;
  readonly expiresAt: number;
}

interface Cursor {
  readonly consumed: Set<string>;
  readonly leases: Map<string, Lease>;
}

interface Sample {
  /** field → its cell in the column store and its size; presence is the production bit. */
  readonly produced: Map<string, { readonly cell: string; readonly bytes: number }>;
  tags: Record<string, TagValue>;
}

interface Partition {
  readonly name: string;
  readonly fields: ReadonlyMap<string, DType>;
  readonly tasks: readonly string[];
  /** Insertion order is first-put order, which is the claim order. */
  readonly samples: Map<string, Sample>;
  readonly cursors: Map<string, Cursor>;
  /** Bytes held by this partition's cells. */
  bytes: number;
}

export class LocalBackend implements Backend {
  private readonly partitions = new Map<string, Partition>();
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly kind: string,
    private readonly store: ColumnStore,
    /** Milliseconds clock for lease expiry (injectable so tests need not sleep). */
    private readonly now: () => number = () => Date.now(),
  ) {}

  async register(name: string, fields: Readonly<Record<string, DType>>, tasks: readonly string[], mode: RegisterMode): Promise<void> {
    checkName(name, 'register partition');
    const existing = this.partitions.get(name);
    if (existing && mode === 'create')
      throw new DataPlaneError(
        'conflict',
        `partition ${JSON.stringify(name)} is already registered (createOnly refuses an existing partition)`,
      );
    if (existing && existing.samples.size > 0) {
      if (mode !== 'replace') {
        throw new DataPlaneError(
          'conflict',
          `partition ${JSON.stringify(name)} still holds ${existing.samples.size} samples; clear it first or register with replace: true`,
        );
      }
      this.clearNow(existing, [...existing.samples.keys()]);
    }
    this.partitions.set(name, {
      name,
      fields: new Map(Object.entries(fields)),
      tasks: [...tasks],
      samples: new Map(),
      cursors: new Map(tasks.map((t) => [t, { consumed: new Set<string>(), leases: new Map<string, Lease>() }])),
      bytes: 0,
    });
    this.notify();
  }

  async put(request: PutRequest): Promise<void> {
    const p = this.partition(request.partition);
    request.fields.forEach((field, f) => {
      const declared = p.fields.get(field);
      if (declared === undefined) {
        throw new DataPlaneError(
          'unknown_field',
          `put to partition ${JSON.stringify(p.name)}: field ${JSON.stringify(field)} is not declared (declared: ${[...p.fields.keys()].join(', ')})`,
        );
      }
      request.rows[f].forEach((row, i) => {
        if (row.dtype !== declared) {
          throw new DataPlaneError(
            'dtype_mismatch',
            `put to partition ${JSON.stringify(p.name)}: field ${JSON.stringify(field)} is declared ${declared}, sample ${JSON.stringify(request.sampleIds[i])} has ${row.dtype}`,
          );
        }
      });
    });

    const prepared: RowValue[][] = [];
    try {
      for (const [f, field] of request.fields.entries()) {
        const column: RowValue[] = [];
        prepared.push(column);
        for (const [i, row] of request.rows[f].entries())
          column.push(await this.store.prepare(row, `${p.name}/${request.sampleIds[i]}/${field}`));
      }
    } catch (err) {
      for (const column of prepared) for (const row of column) this.store.discard(row);
      throw err;
    }
    // The partition may have been re-registered while copies were made; never commit into a new schema.
    if (this.partitions.get(request.partition) !== p) {
      for (const column of prepared) for (const row of column) this.store.discard(row);
      throw new DataPlaneError('conflict', `partition ${JSON.stringify(p.name)} was re-registered while a put to it was in flight`);
    }

    // Commit: bytes, production bits and tags in one synchronous step.
    for (const [i, id] of request.sampleIds.entries()) {
      let sample = p.samples.get(id);
      if (!sample) {
        sample = { produced: new Map(), tags: {} };
        p.samples.set(id, sample);
      }
      for (const [f, field] of request.fields.entries()) {
        const cell = cellKey(p.name, id, field);
        const bytes = rowBytes(prepared[f][i]);
        p.bytes += bytes - (sample.produced.get(field)?.bytes ?? 0);
        this.store.install(cell, prepared[f][i]);
        sample.produced.set(field, { cell, bytes });
      }
      if (request.tags) sample.tags = { ...sample.tags, ...request.tags[i] };
    }
    this.notify();
  }

  async tryClaim(request: ClaimRequest): Promise<ClaimAttempt> {
    const p = this.partition(request.partition);
    const cursor = this.cursor(p, request.task);
    for (const field of request.requiredFields) this.field(p, field);
    const now = this.now();
    for (const [id, lease] of cursor.leases) if (lease.expiresAt <= now) cursor.leases.delete(id);

    const ready: string[] = [];
    const missing: Record<string, number> = Object.fromEntries(request.requiredFields.map((f) => [f, 0]));
    for (const [id, sample] of p.samples) {
      if (cursor.consumed.has(id) || cursor.leases.has(id)) continue;
      let complete = true;
      for (const field of request.requiredFields) {
        if (!sample.produced.has(field)) {
          missing[field] += 1;
          complete = false;
        }
      }
      if (complete) {
        ready.push(id);
        if (ready.length === request.batchSize) break;
      }
    }
    if (ready.length < request.minBatch) return { ok: false, ready: ready.length, missing };

    for (const id of ready) {
      if (request.leaseMs === null) cursor.consumed.add(id);
      else cursor.leases.set(id, { leaseId: request.leaseId!, expiresAt: now + request.leaseMs });
    }
    return { ok: true, sampleIds: ready, tags: ready.map((id) => ({ ...p.samples.get(id)!.tags })) };
  }

  async settle(
    partition: string,
    task: string,
    leaseId: string,
    ids: readonly string[],
    action: SettleAction,
  ): Promise<{ settled: string[]; lost: string[] }> {
    const p = this.partition(partition);
    const cursor = this.cursor(p, task);
    const settled: string[] = [];
    const lost: string[] = [];
    for (const id of ids) {
      if (cursor.leases.get(id)?.leaseId !== leaseId) {
        lost.push(id);
        continue;
      }
      cursor.leases.delete(id);
      if (action !== 'release') cursor.consumed.add(id);
      settled.push(id);
    }
    if (action === 'ack-clear')
      this.clearNow(
        p,
        settled.filter((id) => p.tasks.every((t) => this.cursor(p, t).consumed.has(id))),
      );
    if (action === 'release') this.notify();
    return { settled, lost };
  }

  async consumed(partition: string, tasks: readonly string[]): Promise<boolean> {
    const p = this.partition(partition);
    const cursors = tasks.map((t) => this.cursor(p, t));
    // An empty partition has not been consumed: nothing was produced yet, so "done" would be a lie.
    if (p.samples.size === 0) return false;
    return cursors.every((c) => [...p.samples.keys()].every((id) => c.consumed.has(id)));
  }

  async get(partition: string, ids: readonly string[], fields: readonly string[]): Promise<Record<string, RowValue[]>> {
    const p = this.partition(partition);
    for (const field of fields) this.field(p, field);
    const unknown = ids.filter((id) => !p.samples.has(id));
    if (unknown.length > 0) {
      throw new DataPlaneError(
        'unknown_sample',
        `get from partition ${JSON.stringify(p.name)}: ${unknown.length} unknown or cleared sample id(s): ${listIds(unknown)}`,
      );
    }
    const unproduced: string[] = [];
    for (const id of ids) for (const field of fields) if (!p.samples.get(id)!.produced.has(field)) unproduced.push(`${id}/${field}`);
    if (unproduced.length > 0) {
      throw new DataPlaneError(
        'field_not_produced',
        `get from partition ${JSON.stringify(p.name)}: ${unproduced.length} (sample/field) cell(s) not produced yet: ${listIds(unproduced)}`,
      );
    }
    const out: Record<string, RowValue[]> = {};
    for (const field of fields) out[field] = ids.map((id) => this.store.read(p.samples.get(id)!.produced.get(field)!.cell)!);
    return out;
  }

  async clear(partition: string, target: readonly string[] | 'all'): Promise<number> {
    const p = this.partitions.get(partition);
    if (!p) return 0;
    const removed = this.clearNow(p, target === 'all' ? [...p.samples.keys()] : target);
    this.notify();
    return removed;
  }

  async stats(partition: string): Promise<PartitionStats> {
    const p = this.partition(partition);
    return {
      partition: p.name,
      samples: p.samples.size,
      bytesHeld: p.bytes,
      fields: Object.fromEntries(p.fields),
      consumerTasks: [...p.tasks],
    };
  }

  waitForChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      // Whichever comes first, a change or the timeout, removes the waiter (idle claims must not pile up waiters).
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  async close(): Promise<void> {
    for (const p of this.partitions.values()) this.clearNow(p, [...p.samples.keys()]);
    this.partitions.clear();
    this.store.close();
    this.notify();
  }

  /** Frees the samples' bytes first, then forgets ids, production bits, tags and every cursor entry. */
  private clearNow(p: Partition, ids: readonly string[]): number {
    let removed = 0;
    for (const id of ids) {
      const sample = p.samples.get(id);
      if (!sample) continue;
      for (const { cell, bytes } of sample.produced.values()) {
        this.store.free(cell);
        p.bytes -= bytes;
      }
      p.samples.delete(id);
      for (const cursor of p.cursors.values()) {
        cursor.consumed.delete(id);
        cursor.leases.delete(id);
      }
      removed += 1;
    }
    return removed;
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }

  private partition(name: string): Partition {
    const p = this.partitions.get(name);
    if (!p)
      throw new DataPlaneError(
        'unknown_partition',
        `partition ${JSON.stringify(name)} is not registered (known: ${[...this.partitions.keys()].join(', ') || 'none'})`,
      );
    return p;
  }

  private cursor(p: Partition, task: string): Cursor {
    const c = p.cursors.get(task);
    if (!c)
      throw new DataPlaneError(
        'unknown_task',
        `task ${JSON.stringify(task)} is not a consumer of partition ${JSON.stringify(p.name)} (registered: ${p.tasks.join(', ')})`,
      );
    return c;
  }

  private field(p: Partition, field: string): DType {
    const dtype = p.fields.get(field);
    if (dtype === undefined)
      throw new DataPlaneError(
        'unknown_field',
        `field ${JSON.stringify(field)} is not declared in partition ${JSON.stringify(p.name)} (declared: ${[...p.fields.keys()].join(', ')})`,
      );
    return dtype;
  }
}

function cellKey(partition: string, id: string, field: string): string {
  return `${partition}\u0000${id}\u0000${field}`;
}
