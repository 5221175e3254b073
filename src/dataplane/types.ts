/**
 * The experience data plane's public contract: values and the `DataPlaneClient` interface (its
 * errors are in errors.ts, re-exported here).
 *
 * This module imports nothing heavy (only type-level GPU handles), so any plane may depend on it
 * without pulling a store, a Redis client or a GPU device into its import graph.
 *
 * Semantics (docs/dataplane.md §4, with the stricter rules of §5 adopted):
 *  - completion is field production: writing (sample, field) flips its bit and unblocks claimants;
 *  - claims are atomic per task, optionally leased so a crashed consumer does not lose rows;
 *  - every read names its fields; missing ids / unproduced fields are errors, never dropped rows;
 *  - puts reject undeclared fields, dtype changes and duplicate ids.
 */
import type { DType, Tensor } from '../gpu/tensor.ts';
import type { KVBatchMeta, TagValue } from './meta.ts';

export type { DType } from '../gpu/tensor.ts';

/** Typed-array storage for one row of a field; `f16` rows are raw half-precision bits in a Uint16Array. */
export type HostData = Float32Array | Int32Array | Uint32Array | Uint16Array;

/** One (sample, field) value held in host memory. */
export interface HostTensor {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: HostData;
}

/** One (sample, field) value: host typed array, or a GPU tensor when the store keeps columns on the GPU. */
export type RowValue = HostTensor | Tensor;

/** Column-major batch: field name → one value per sample, aligned with the sample id list. */
export type Columns = Readonly<Record<string, readonly RowValue[]>>;

/** Per-sample primitive tags (already validated). */
export type Tags = Readonly<Record<string, TagValue>>;

export interface RegisterPartitionOptions {
  readonly partition: string;
  /** Every field any producer may write, with its one dtype. Writes of other fields are rejected. */
  readonly fields: Readonly<Record<string, DType>>;
  /** Consumer tasks; each gets an independent cursor. Claims by other task names are rejected. */
  readonly consumerTasks: readonly string[];
  /**
   * Re-registering a partition that still holds samples is an error unless `replace` is set, which
   * wipes its samples, bytes and cursors first (an empty partition may always be re-registered).
   */
  readonly replace?: boolean;
  /**
   * Refuse (`conflict`) a partition that is already registered, even an empty one, in the same
   * atomic step as the registration: for a producer that must never redeclare a schema it did not
   * make (the gateway forces it on rollout-only tokens). Excludes `replace`.
   */
  readonly createOnly?: boolean;
}

export interface ClaimOptions {
  readonly partition: string;
  readonly task: string;
  /** Rows are claimable once every one of these fields is produced. Non-empty, declared names. */
  readonly requiredFields: readonly string[];
  /** At most this many rows per claim. */
  readonly batchSize: number;
  /**
   * Fewest rows worth claiming (default `batchSize`, i.e. all-or-nothing like upstream). Use 1 to
   * drain the tail of a stream.
   */
  readonly minBatch?: number;
  /** Wait until `minBatch` rows are ready (default true); non-blocking returns an empty meta. */
  readonly blocking?: boolean;
  /** Blocking claims throw `ClaimTimeoutError` after this long (default 60 s). */
  readonly timeoutMs?: number;
  /**
   * Lease the rows for this long instead of consuming them at claim time. The consumer must
   * `ackClaim` (consumed) or `releaseClaim` (back to the task) before expiry; rows of an expired
   * lease return to the task, so a crashed consumer loses nothing.
   */
  readonly leaseMs?: number;
}

export interface PutOptions {
  readonly partition: string;
  readonly sampleIds: readonly string[];
  /** At least one declared field; each column holds exactly `sampleIds.length` rows. */
  readonly columns: Columns;
  /** Per-sample primitive tags (merged key by key into the stored tags, committed with the bits). */
  readonly tags?: readonly Readonly<Record<string, unknown>>[];
}

export interface GetOptions {
  readonly partition: string;
  readonly sampleIds: readonly string[];
  /** Explicit, non-empty: there is no "all fields" default. */
  readonly fields: readonly string[];
}

/** What `clearSamples` removes: explicit ids, or every sample of the partition (schema and tasks stay). */
export type ClearTarget = readonly string[] | { readonly all: true };

export interface SettleResult {
  /** Ids whose lease this call settled. */
  readonly settled: readonly string[];
}

export interface AckOptions {
  /**
   * Also clear, in the same atomic step, each acked row that every consumer task has now consumed
   * (its bytes freed, its id forgotten). A consumer that dies after acking can then strand nothing:
   * there is no moment when a row is consumed by all but still held for a clear that never comes.
   */
  readonly clear?: boolean;
}

/** Store-side view of a partition (authoritative across processes). */
export interface PartitionStats {
  readonly partition: string;
  readonly samples: number;
  /** Tensor bytes currently held for this partition. */
  readonly bytesHeld: number;
  readonly fields: Readonly<Record<string, DType>>;
  readonly consumerTasks: readonly string[];
}

export interface DataPlaneClient {
  /** Which adapter/backend serves this client, e.g. `noop`, `transferQueue/local`, `transferQueue/redis`. */
  readonly kind: string;
  registerPartition(options: RegisterPartitionOptions): Promise<void>;
  /** Atomically claim ready rows for a task; see `ClaimOptions`. */
  claimMeta(options: ClaimOptions): Promise<KVBatchMeta>;
  /** Settle a leased claim as consumed. Throws `lease_lost` naming ids whose lease moved to another claim. */
  ackClaim(meta: KVBatchMeta, options?: AckOptions): Promise<SettleResult>;
  /** Give a leased claim back to its task now (graceful failure path). */
  releaseClaim(meta: KVBatchMeta): Promise<SettleResult>;
  /** Read a meta's rows; `fields` is mandatory. */
  getData(meta: KVBatchMeta, fields: readonly string[]): Promise<Columns>;
  /** True iff every listed task consumed every sample currently in the (non-empty) partition. */
  checkConsumptionStatus(partition: string, tasks: readonly string[]): Promise<boolean>;
  /** Producer entry point; returns a receipt listing the fields this put wrote. */
  putSamples(options: PutOptions): Promise<KVBatchMeta>;
  /** Direct read by id; never moves a cursor. Rows come back in request order. */
  getSamples(options: GetOptions): Promise<Columns>;
  /** Idempotent; frees bytes and cursor state in the same step that forgets the ids. Returns ids removed. */
  clearSamples(partition: string, target: ClearTarget): Promise<number>;
  partitionStats(partition: string): Promise<PartitionStats>;
  /** Idempotent. Releases what this client owns; later calls fail with `closed`. */
  close(): Promise<void>;
}

export { ClaimTimeoutError, DataPlaneError, ERROR_ID_LIMIT, LeaseLostError, listIds, type DataPlaneErrorCode } from './errors.ts';
