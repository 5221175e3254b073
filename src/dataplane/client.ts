/**
 * The `DataPlaneClient` every adapter exposes, over a `Backend` that owns the state.
 *
 * The client validates arguments (so every backend rejects bad input with the same message) and
 * runs the client-side claim wait: upstream learned that waiting inside the controller stalls the
 * very producer notifications the waiter needs (docs/dataplane.md §4.2), so backends only offer a single
 * atomic attempt and the client polls between attempts until its deadline.
 */
import { checkRow } from './column-store.ts';
import { KVBatchMeta, lengthsFromTags, validateTagRecord, type TagValue } from './meta.ts';
import { checkDType, checkName } from './names.ts';
import {
  ClaimTimeoutError,
  DataPlaneError,
  LeaseLostError,
  listIds,
  type AckOptions,
  type ClaimOptions,
  type ClearTarget,
  type Columns,
  type DataPlaneClient,
  type DType,
  type GetOptions,
  type PartitionStats,
  type PutOptions,
  type RegisterPartitionOptions,
  type RowValue,
  type SettleResult,
} from './types.ts';

export interface PutRequest {
  readonly partition: string;
  readonly sampleIds: readonly string[];
  readonly fields: readonly string[];
  /** rows[f][i]: field `fields[f]` of sample i (already shape-checked). */
  readonly rows: readonly (readonly RowValue[])[];
  /** Validated tags per sample, or null. */
  readonly tags: readonly Readonly<Record<string, TagValue>>[] | null;
}

export interface ClaimRequest {
  readonly partition: string;
  readonly task: string;
  readonly requiredFields: readonly string[];
  readonly batchSize: number;
  readonly minBatch: number;
  /** null: consume at claim time. */
  readonly leaseMs: number | null;
  readonly leaseId: string | null;
}

/**
 * How `register` treats a partition that exists: `replace` wipes it first, `reuse-empty` re-declares
 * it only while it holds no samples, `create` refuses it (a producer that must not touch a schema it
 * did not make).
 */
export type RegisterMode = 'replace' | 'reuse-empty' | 'create';

/** What settling a leased claim does: consume it, consume and clear it, or give it back. */
export type SettleAction = 'ack' | 'ack-clear' | 'release';

export type ClaimAttempt =
  | { readonly ok: true; readonly sampleIds: readonly string[]; readonly tags: readonly Readonly<Record<string, TagValue>>[] }
  /** Not enough ready rows: how many were ready, and per required field how many unclaimed rows lack it. */
  | { readonly ok: false; readonly ready: number; readonly missing: Readonly<Record<string, number>> };

/** State owner behind a client: in-process maps or a Redis server. Each method is one atomic step. */
export interface Backend {
  readonly kind: string;
  register(partition: string, fields: Readonly<Record<string, DType>>, tasks: readonly string[], mode: RegisterMode): Promise<void>;
  put(request: PutRequest): Promise<void>;
  tryClaim(request: ClaimRequest): Promise<ClaimAttempt>;
  /**
   * Settle rows still held by `leaseId`; returns which were settled and which had lost the lease.
   * 'ack-clear' also drops, in the same atomic step, each acked row every consumer task has consumed.
   */
  settle(
    partition: string,
    task: string,
    leaseId: string,
    ids: readonly string[],
    action: SettleAction,
  ): Promise<{ settled: string[]; lost: string[] }>;
  consumed(partition: string, tasks: readonly string[]): Promise<boolean>;
  get(partition: string, ids: readonly string[], fields: readonly string[]): Promise<Record<string, RowValue[]>>;
  clear(partition: string, target: readonly string[] | 'all'): Promise<number>;
  stats(partition: string): Promise<PartitionStats>;
  /** Resolves after a change that might make a claim succeed, or after `ms` at the latest. */
  waitForChange(ms: number): Promise<void>;
  close(): Promise<void>;
}

export interface StoreClientOptions {
  /** Longest sleep between claim attempts. */
  readonly claimPollMs: number;
}

export class StoreClient implements DataPlaneClient {
  private closed = false;

  constructor(
    private readonly backend: Backend,
    private readonly options: StoreClientOptions,
    readonly kind: string = backend.kind,
  ) {}

  async registerPartition(options: RegisterPartitionOptions): Promise<void> {
    this.live();
    const partition = checkName(options.partition, 'registerPartition.partition');
    const fields = options.fields;
    if (fields === null || typeof fields !== 'object' || Object.keys(fields).length === 0) {
      throw new DataPlaneError('invalid_argument', `registerPartition(${partition}).fields must declare at least one field with its dtype`);
    }
    // A null-prototype record: field names can never reach Object.prototype.
    const declared: Record<string, DType> = Object.create(null) as Record<string, DType>;
    for (const [field, dtype] of Object.entries(fields)) {
      checkName(field, `registerPartition(${partition}) field name`);
      declared[field] = checkDType(dtype, `registerPartition(${partition}) field ${JSON.stringify(field)}`);
    }
    const tasks = uniqueNames(options.consumerTasks, `registerPartition(${partition}).consumerTasks`);
    if (tasks.length === 0)
      throw new DataPlaneError('invalid_argument', `registerPartition(${partition}).consumerTasks must name at least one task`);
    if (options.replace !== undefined && typeof options.replace !== 'boolean')
      throw new DataPlaneError(
        'invalid_argument',
        `registerPartition(${partition}).replace must be a boolean, got ${JSON.stringify(options.replace)}`,
      );
    if (options.createOnly !== undefined && typeof options.createOnly !== 'boolean')
      throw new DataPlaneError(
        'invalid_argument',
        `registerPartition(${partition}).createOnly must be a boolean, got ${JSON.stringify(options.createOnly)}`,
      );
    if (options.replace === true && options.createOnly === true)
      throw new DataPlaneError('invalid_argument', `registerPartition(${partition}): replace and createOnly exclude each other`);
    const mode: RegisterMode = options.replace === true ? 'replace' : options.createOnly === true ? 'create' : 'reuse-empty';
    await this.backend.register(partition, declared, tasks, mode);
  }

  async claimMeta(options: ClaimOptions): Promise<KVBatchMeta> {
    this.live();
    const partition = checkName(options.partition, 'claimMeta.partition');
    const task = checkName(options.task, 'claimMeta.task');
    const required = uniqueNames(options.requiredFields, 'claimMeta.requiredFields');
    if (required.length === 0) throw new DataPlaneError('invalid_argument', 'claimMeta.requiredFields must name at least one field');
    const batchSize = atMost(positiveInt(options.batchSize, 'claimMeta.batchSize'), MAX_CLAIM_ROWS, 'claimMeta.batchSize');
    const minBatch = atMost(positiveInt(options.minBatch ?? batchSize, 'claimMeta.minBatch'), MAX_CLAIM_ROWS, 'claimMeta.minBatch');
    if (minBatch > batchSize) throw new DataPlaneError('invalid_argument', `claimMeta.minBatch ${minBatch} exceeds batchSize ${batchSize}`);
    const leaseMs = options.leaseMs === undefined ? null : positiveInt(options.leaseMs, 'claimMeta.leaseMs');
    const timeoutMs = options.timeoutMs ?? 60_000;
    if (!(timeoutMs >= 0)) throw new DataPlaneError('invalid_argument', `claimMeta.timeoutMs must be >= 0, got ${timeoutMs}`);
    const leaseId = leaseMs === null ? null : newLeaseId();
    const request: ClaimRequest = { partition, task, requiredFields: required, batchSize, minBatch, leaseMs, leaseId };

    const deadline = performance.now() + timeoutMs;
    for (;;) {
      // At least one attempt, even with timeoutMs = 0.
      const attempt = await this.backend.tryClaim(request);
      if (attempt.ok) {
        return new KVBatchMeta({
          partition,
          taskName: task,
          sampleIds: attempt.sampleIds,
          fields: required,
          tags: attempt.tags,
          sequenceLengths: lengthsFromTags(attempt.tags),
          leaseId,
        });
      }
      if (options.blocking === false) return new KVBatchMeta({ partition, taskName: task, sampleIds: [], fields: required });
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        const lagging = Object.entries(attempt.missing).filter(([, n]) => n > 0);
        const detail =
          lagging.length === 0
            ? 'no unclaimed rows are waiting on any required field (producers have not put enough rows)'
            : `lagging fields: ${lagging.map(([f, n]) => `${f} (missing on ${n} unclaimed rows)`).join(', ')}`;
        throw new ClaimTimeoutError(
          `claimMeta timed out after ${timeoutMs} ms: partition ${JSON.stringify(partition)}, task ${JSON.stringify(task)} wanted ${minBatch}..${batchSize} rows with [${required.join(', ')}], ${attempt.ready} ready; ${detail}`,
          attempt.ready,
          attempt.missing,
        );
      }
      this.live();
      await this.backend.waitForChange(Math.min(this.options.claimPollMs, remaining));
    }
  }

  ackClaim(meta: KVBatchMeta, options: AckOptions = {}): Promise<SettleResult> {
    if (options === null || typeof options !== 'object') throw new DataPlaneError('invalid_argument', 'ackClaim options must be an object');
    if (options.clear !== undefined && typeof options.clear !== 'boolean')
      throw new DataPlaneError('invalid_argument', `ackClaim options.clear must be a boolean, got ${JSON.stringify(options.clear)}`);
    return this.settle(meta, options.clear ? 'ack-clear' : 'ack');
  }

  releaseClaim(meta: KVBatchMeta): Promise<SettleResult> {
    return this.settle(meta, 'release');
  }

  private async settle(meta: KVBatchMeta, action: SettleAction): Promise<SettleResult> {
    this.live();
    const op = action === 'release' ? 'releaseClaim' : 'ackClaim';
    if (!(meta instanceof KVBatchMeta)) throw new DataPlaneError('invalid_argument', `${op} needs a KVBatchMeta`);
    if (meta.leaseId === null || meta.taskName === null) {
      throw new DataPlaneError(
        'invalid_argument',
        `${op}: meta of partition ${JSON.stringify(meta.partition)} is not a leased claim (claim with leaseMs to settle explicitly)`,
      );
    }
    const partition = checkName(meta.partition, `${op} meta.partition`);
    const task = checkName(meta.taskName, `${op} meta.taskName`);
    const { settled, lost } = await this.backend.settle(partition, task, meta.leaseId, [...new Set(meta.sampleIds)], action);
    if (lost.length > 0) {
      throw new LeaseLostError(
        `${op}: lease ${meta.leaseId} of task ${JSON.stringify(meta.taskName)} no longer holds ${lost.length} sample(s) (expired and reclaimed, or cleared): ${listIds(lost)}; ${settled.length} settled`,
        settled,
        lost,
      );
    }
    return { settled };
  }

  async getData(meta: KVBatchMeta, fields: readonly string[]): Promise<Columns> {
    if (!(meta instanceof KVBatchMeta)) throw new DataPlaneError('invalid_argument', 'getData needs a KVBatchMeta');
    return this.getSamples({ partition: meta.partition, sampleIds: meta.sampleIds, fields });
  }

  async checkConsumptionStatus(partition: string, tasks: readonly string[]): Promise<boolean> {
    this.live();
    const names = uniqueNames(tasks, 'checkConsumptionStatus.tasks');
    if (names.length === 0) throw new DataPlaneError('invalid_argument', 'checkConsumptionStatus.tasks must name at least one task');
    return this.backend.consumed(checkName(partition, 'checkConsumptionStatus.partition'), names);
  }

  async putSamples(options: PutOptions): Promise<KVBatchMeta> {
    this.live();
    const partition = checkName(options.partition, 'putSamples.partition');
    const ids = sampleIdList(options.sampleIds, 'putSamples.sampleIds');
    const seen = new Set<string>();
    const dups = ids.filter((id) => (seen.has(id) ? true : (seen.add(id), false)));
    if (dups.length > 0)
      throw new DataPlaneError('invalid_argument', `putSamples(${partition}): duplicate sample ids in one put: ${listIds(dups)}`);
    if (options.columns === null || typeof options.columns !== 'object')
      throw new DataPlaneError('invalid_argument', `putSamples(${partition}).columns must be an object of field → rows`);
    const fields = Object.keys(options.columns);
    if (fields.length === 0)
      throw new DataPlaneError('invalid_argument', `putSamples(${partition}) writes no field; name at least one column`);
    for (const field of fields) checkName(field, `putSamples(${partition}) field name`);
    const rows = fields.map((field) => {
      const column = options.columns[field];
      if (!Array.isArray(column) || column.length !== ids.length) {
        throw new DataPlaneError(
          'invalid_argument',
          `putSamples(${partition}) column ${JSON.stringify(field)} has ${Array.isArray(column) ? column.length : 'no'} rows for ${ids.length} sample ids`,
        );
      }
      return column.map((row, i) =>
        checkRow(row, `putSamples(${partition}) field ${JSON.stringify(field)} of sample ${JSON.stringify(ids[i])}`),
      );
    });
    let tags: Readonly<Record<string, TagValue>>[] | null = null;
    if (options.tags !== undefined) {
      if (!Array.isArray(options.tags) || options.tags.length !== ids.length) {
        throw new DataPlaneError(
          'invalid_argument',
          `putSamples(${partition}).tags has ${Array.isArray(options.tags) ? options.tags.length : 'no'} entries for ${ids.length} samples (must align 1:1)`,
        );
      }
      tags = options.tags.map((t, i) => validateTagRecord(t, `putSamples(${partition}) tags of sample ${JSON.stringify(ids[i])}`));
    }
    if (ids.length > 0) await this.backend.put({ partition, sampleIds: ids, fields, rows, tags });
    return new KVBatchMeta({ partition, taskName: null, sampleIds: ids, fields, tags, sequenceLengths: lengthsFromTags(tags) });
  }

  async getSamples(options: GetOptions): Promise<Columns> {
    this.live();
    const partition = checkName(options.partition, 'getSamples.partition');
    const ids = sampleIdList(options.sampleIds, 'getSamples.sampleIds');
    if (!Array.isArray(options.fields) || options.fields.length === 0) {
      throw new DataPlaneError(
        'invalid_argument',
        `getSamples(${partition}) needs an explicit, non-empty field list (there is no "all fields" read)`,
      );
    }
    const fields = uniqueNames(options.fields, `getSamples(${partition}).fields`);
    return this.backend.get(partition, ids, fields);
  }

  async clearSamples(partition: string, target: ClearTarget): Promise<number> {
    this.live();
    const p = checkName(partition, 'clearSamples.partition');
    if (Array.isArray(target)) return this.backend.clear(p, sampleIdList(target, 'clearSamples ids'));
    if (target !== null && typeof target === 'object' && (target as { all?: unknown }).all === true) return this.backend.clear(p, 'all');
    throw new DataPlaneError(
      'invalid_argument',
      'clearSamples target must be an id list or { all: true } (there is no implicit "clear everything")',
    );
  }

  async partitionStats(partition: string): Promise<PartitionStats> {
    this.live();
    return this.backend.stats(checkName(partition, 'partitionStats.partition'));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.backend.close();
  }

  private live(): void {
    if (this.closed) throw new DataPlaneError('closed', `data plane client (${this.kind}) is closed`);
  }
}

/** Sample ids are free-form (they never form a key outside their partition's hash tag), only non-empty. */
function sampleId(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '')
    throw new DataPlaneError('invalid_argument', `${what} must be a non-empty string, got ${JSON.stringify(value)}`);
  return value;
}

function uniqueNames(values: unknown, what: string): string[] {
  if (!Array.isArray(values)) throw new DataPlaneError('invalid_argument', `${what} must be an array of names`);
  const out: string[] = [];
  for (const [i, v] of values.entries()) {
    const n = checkName(v, `${what}[${i}]`);
    if (out.includes(n)) throw new DataPlaneError('invalid_argument', `${what} lists ${JSON.stringify(n)} twice`);
    out.push(n);
  }
  return out;
}

function sampleIdList(values: unknown, what: string): string[] {
  if (!Array.isArray(values)) throw new DataPlaneError('invalid_argument', `${what} must be an array of sample ids`);
  return values.map((v, i) => sampleId(v, `${what}[${i}]`));
}

/** Rows one claim may ask for: far above any batch, far below sizes that only a hostile caller sends. */
export const MAX_CLAIM_ROWS = 1 << 20;

function atMost(value: number, max: number, what: string): number {
  if (value > max) throw new DataPlaneError('invalid_argument', `${what} must be at most ${max}, got ${value}`);
  return value;
}

function positiveInt(value: unknown, what: string): number {
  // Safe integers only: 2^53 and above are not exact, so they cannot count rows or milliseconds.
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1)
    throw new DataPlaneError('invalid_argument', `${what} must be a positive integer, got ${JSON.stringify(value)}`);
  return value;
}

/** Unique across processes (Web Crypto exists in Node, Deno and browsers). */
function newLeaseId(): string {
  return crypto.randomUUID();
}
