/**
 * Metrics middleware (docs/dataplane.md §8): wraps any `DataPlaneClient`, emits one event per call and
 * keeps running totals, including the bytes this process put that are still outstanding (not yet
 * cleared). Producers use `backpressure()` / `waitForCapacity()` to stop putting when too many
 * bytes are in flight, instead of growing the store without bound.
 */
import { rowBytes } from './column-store.ts';
import type { KVBatchMeta } from './meta.ts';
import {
  DataPlaneError,
  type ClaimOptions,
  type ClearTarget,
  type Columns,
  type DataPlaneClient,
  type GetOptions,
  type PartitionStats,
  type PutOptions,
  type RegisterPartitionOptions,
  type SettleResult,
  type AckOptions,
} from './types.ts';

export type DataPlaneOp =
  'register' | 'claim' | 'ack' | 'release' | 'getData' | 'consumption' | 'put' | 'get' | 'clear' | 'stats' | 'close';
export type DataPlaneStatus = 'ok' | 'error' | 'timeout';

export interface DataPlaneEvent {
  readonly op: DataPlaneOp;
  readonly partition: string;
  readonly nKeys: number;
  readonly nBytes: number;
  readonly wallMs: number;
  readonly status: DataPlaneStatus;
}

export interface DataPlaneTotals {
  /** Successful calls (failures are counted separately). */
  readonly ops: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly keys: number;
  readonly bytesPut: number;
  readonly bytesRead: number;
  /** Bytes put through this wrapper and not yet cleared (per-partition sum). */
  readonly bytesOutstanding: number;
  readonly peakBytesOutstanding: number;
  readonly keysOutstanding: number;
  readonly bytesOutstandingByPartition: Readonly<Record<string, number>>;
}

export interface Backpressure {
  /** True when `bytesOutstanding >= limitBytes`: the producer should wait before putting more. */
  readonly blocked: boolean;
  readonly bytesOutstanding: number;
  readonly limitBytes: number | null;
}

export interface MetricsOptions {
  readonly onEvent?: (event: DataPlaneEvent) => void;
  /** Back-pressure threshold; absent = never blocked. */
  readonly maxBytesOutstanding?: number;
}

/** Sum of tensor bytes over every row of every column. */
export function columnBytes(columns: Columns): number {
  let n = 0;
  for (const rows of Object.values(columns)) for (const row of rows) n += rowBytes(row);
  return n;
}

export class MetricsDataPlaneClient implements DataPlaneClient {
  readonly kind: string;
  private ops = 0;
  private errors = 0;
  private timeouts = 0;
  private keys = 0;
  private bytesPut = 0;
  private bytesRead = 0;
  private peak = 0;
  /** partition → sample → bytes put (for exact subtraction on clear) and partition totals. */
  private readonly ledger = new Map<string, Map<string, number>>();
  private readonly partitionBytes = new Map<string, number>();

  constructor(
    readonly inner: DataPlaneClient,
    private readonly options: MetricsOptions = {},
  ) {
    this.kind = `metrics(${inner.kind})`;
    const limit = options.maxBytesOutstanding;
    if (limit !== undefined && !(Number.isInteger(limit) && limit > 0)) {
      throw new DataPlaneError('invalid_argument', `maxBytesOutstanding must be a positive integer, got ${limit}`);
    }
  }

  registerPartition(options: RegisterPartitionOptions): Promise<void> {
    return this.record(
      'register',
      options.partition,
      () => this.inner.registerPartition(options),
      () => [0, 0],
    );
  }

  claimMeta(options: ClaimOptions): Promise<KVBatchMeta> {
    return this.record(
      'claim',
      options.partition,
      () => this.inner.claimMeta(options),
      (meta) => [meta.size, 0],
    );
  }

  ackClaim(meta: KVBatchMeta, options?: AckOptions): Promise<SettleResult> {
    return this.record(
      'ack',
      meta.partition,
      () => this.inner.ackClaim(meta, options),
      (r) => [r.settled.length, 0],
    );
  }

  releaseClaim(meta: KVBatchMeta): Promise<SettleResult> {
    return this.record(
      'release',
      meta.partition,
      () => this.inner.releaseClaim(meta),
      (r) => [r.settled.length, 0],
    );
  }

  getData(meta: KVBatchMeta, fields: readonly string[]): Promise<Columns> {
    return this.record(
      'getData',
      meta.partition,
      () => this.inner.getData(meta, fields),
      (cols) => {
        const bytes = columnBytes(cols);
        this.bytesRead += bytes;
        return [meta.size, bytes];
      },
    );
  }

  checkConsumptionStatus(partition: string, tasks: readonly string[]): Promise<boolean> {
    return this.record(
      'consumption',
      partition,
      () => this.inner.checkConsumptionStatus(partition, tasks),
      () => [0, 0],
    );
  }

  putSamples(options: PutOptions): Promise<KVBatchMeta> {
    return this.record(
      'put',
      options.partition,
      () => this.inner.putSamples(options),
      (receipt) => {
        // Bytes are attributed per sample so a later clear of some ids subtracts exactly their share.
        let total = 0;
        const perSample = receipt.sampleIds.map((_, i) => {
          let n = 0;
          for (const rows of Object.values(options.columns)) n += rowBytes(rows[i]);
          total += n;
          return n;
        });
        const book = this.book(options.partition);
        receipt.sampleIds.forEach((id, i) => book.set(id, (book.get(id) ?? 0) + perSample[i]));
        this.partitionBytes.set(options.partition, (this.partitionBytes.get(options.partition) ?? 0) + total);
        this.bytesPut += total;
        this.peak = Math.max(this.peak, this.outstanding());
        return [receipt.size, total];
      },
    );
  }

  getSamples(options: GetOptions): Promise<Columns> {
    return this.record(
      'get',
      options.partition,
      () => this.inner.getSamples(options),
      (cols) => {
        const bytes = columnBytes(cols);
        this.bytesRead += bytes;
        return [options.sampleIds.length, bytes];
      },
    );
  }

  clearSamples(partition: string, target: ClearTarget): Promise<number> {
    return this.record(
      'clear',
      partition,
      () => this.inner.clearSamples(partition, target),
      (removed) => {
        const book = this.book(partition);
        const ids = Array.isArray(target) ? (target as readonly string[]) : [...book.keys()];
        let freed = 0;
        for (const id of ids) {
          freed += book.get(id) ?? 0;
          book.delete(id);
        }
        if (!Array.isArray(target)) book.clear();
        this.partitionBytes.set(partition, Math.max(0, (this.partitionBytes.get(partition) ?? 0) - freed));
        return [Array.isArray(target) ? target.length : removed, 0];
      },
    );
  }

  partitionStats(partition: string): Promise<PartitionStats> {
    return this.record(
      'stats',
      partition,
      () => this.inner.partitionStats(partition),
      () => [0, 0],
    );
  }

  close(): Promise<void> {
    return this.record(
      'close',
      '',
      () => this.inner.close(),
      () => [0, 0],
    );
  }

  totals(): DataPlaneTotals {
    let keysOutstanding = 0;
    for (const book of this.ledger.values()) keysOutstanding += book.size;
    return {
      ops: this.ops,
      errors: this.errors,
      timeouts: this.timeouts,
      keys: this.keys,
      bytesPut: this.bytesPut,
      bytesRead: this.bytesRead,
      bytesOutstanding: this.outstanding(),
      peakBytesOutstanding: this.peak,
      keysOutstanding,
      bytesOutstandingByPartition: Object.fromEntries(this.partitionBytes),
    };
  }

  /** One line for progress output, e.g. `dataplane ops=12 put=1.2MB outstanding=0.4MB peak=0.8MB errors=0`. */
  progressLine(): string {
    const t = this.totals();
    const mb = (n: number): string => `${(n / 1e6).toFixed(1)}MB`;
    return `dataplane ops=${t.ops} put=${mb(t.bytesPut)} read=${mb(t.bytesRead)} outstanding=${mb(t.bytesOutstanding)} peak=${mb(t.peakBytesOutstanding)} errors=${t.errors} timeouts=${t.timeouts}`;
  }

  backpressure(): Backpressure {
    const limit = this.options.maxBytesOutstanding ?? null;
    const bytesOutstanding = this.outstanding();
    return { blocked: limit !== null && bytesOutstanding >= limit, bytesOutstanding, limitBytes: limit };
  }

  /**
   * Wait until this producer may put again. Consumers in other processes clear rows this wrapper
   * never sees, so while blocked it reconciles with the store: a partition whose store-side bytes
   * are below the ledger's count adopts the store's (lower) count. Throws after `timeoutMs`.
   */
  async waitForCapacity(options: { timeoutMs: number; pollMs?: number }): Promise<Backpressure> {
    const deadline = performance.now() + options.timeoutMs;
    for (;;) {
      let state = this.backpressure();
      if (!state.blocked) return state;
      for (const partition of this.partitionBytes.keys()) {
        const stats = await this.inner.partitionStats(partition);
        if (stats.bytesHeld < (this.partitionBytes.get(partition) ?? 0)) this.partitionBytes.set(partition, stats.bytesHeld);
      }
      state = this.backpressure();
      if (!state.blocked) return state;
      if (performance.now() >= deadline) {
        throw new DataPlaneError(
          'timeout',
          `back-pressure: ${state.bytesOutstanding} bytes outstanding ≥ limit ${state.limitBytes} for ${options.timeoutMs} ms (consumers are not clearing)`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 50));
    }
  }

  private outstanding(): number {
    let n = 0;
    for (const b of this.partitionBytes.values()) n += b;
    return n;
  }

  private book(partition: string): Map<string, number> {
    let book = this.ledger.get(partition);
    if (!book) {
      book = new Map();
      this.ledger.set(partition, book);
    }
    return book;
  }

  private async record<T>(
    op: DataPlaneOp,
    partition: string,
    call: () => Promise<T>,
    measure: (result: T) => [number, number],
  ): Promise<T> {
    const start = performance.now();
    let result: T;
    try {
      result = await call();
    } catch (err) {
      const timeout = err instanceof DataPlaneError && err.code === 'timeout';
      if (timeout) this.timeouts += 1;
      else this.errors += 1;
      this.emit({ op, partition, nKeys: 0, nBytes: 0, wallMs: performance.now() - start, status: timeout ? 'timeout' : 'error' });
      throw err;
    }
    const [nKeys, nBytes] = measure(result);
    this.ops += 1;
    this.keys += nKeys;
    this.emit({ op, partition, nKeys, nBytes, wallMs: performance.now() - start, status: 'ok' });
    return result;
  }

  private emit(event: DataPlaneEvent): void {
    this.options.onEvent?.(event);
  }
}
