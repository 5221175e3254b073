/**
 * The data plane's tensor holder: a GPU-resident feature store addressed by metadata-only SampleRefs
 * (reference §3.1–§3.2, with HEAD's reclamation fixes).
 *
 * - `put` takes ownership of the caller's GPU tensors (no copy) after checking the byte budget
 *   BEFORE insertion: an over-budget put changes nothing and the caller still owns its tensors.
 * - Every (re)put gets the next value of a process-wide monotonic generation; the ref's URI carries
 *   it, so a ref from before a re-put is stale and `get` rejects it.
 * - `get` registers a lease and returns the stored tensors by reference, or GPU copies when
 *   `cloneOnGet` is set (the loader clones itself and releases right after the copy).
 * - Consume-once: the release of the last lease on the current generation frees the sample.
 * - `abort` evicts at once for new readers; the GPU buffers themselves are returned to the pool only
 *   when no lease holder can still read them (unlike a Python tensor, a pooled GPU buffer would be
 *   reused under a reader's feet).
 * - `gc` force-frees unleased samples held longer than `maxHoldAgeMs`.
 *
 * Spill (optional `spill: FileStore`, reference §2.7): a crash loses GPU memory, so a committed but
 * not yet durably acked sample must be recoverable from disk. With a spill, `put` reads the tensors
 * back (gpu.read), writes them as one safetensors file `<quoted sample id>.safetensors` with
 * writeAtomic (temp + fsync + rename) and only then registers the sample and returns its ref, so a
 * commit can never name a sample that is not on disk. Cost per put: one GPU→CPU readback (it
 * flushes the command batch and waits for the queue), one CPU copy into the file image, and one
 * write + fsync: milliseconds per sample on a real disk, so the spill is a durability tap for
 * online runs, not a hot path (bench/runtime.ts measures it).
 * With a spill the release of the last lease frees the GPU buffers but keeps the file: the sample
 * stays gettable until `abort` (which the controller calls after the durable ack) deletes it.
 * Recovery choice: `get` falls back to the spill. A ref whose sample is not resident is
 * re-materialised from its file when the file's recorded generation equals the ref's, so the refs
 * a restarted controller requeues (the ones in the metadata store) stay valid as they are, a
 * retryable failure that requeues the committed ref still works, and nothing is loaded before a
 * trainer asks for it (no GPU memory spike at restart). `adopt` re-materialises eagerly with a fresh
 * generation for callers that want that instead.
 */
import { makeFeatureHandle, makeFeatureSpec, makeSampleRef, type FeatureHandle, type FeatureSpec, type SampleRef } from '../contracts/index.ts';
import type { JsonRecord } from '../contracts/records.ts';
import type { DraftStrategyName, TargetRepr } from '../contracts/enums.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { BYTES_PER_ELEMENT, Tensor, type DType } from '../gpu/tensor.ts';
import type { FileStore } from '../ports/storage.ts';
import { SafetensorsFile, SafetensorsReader, writeSafetensors, type SafetensorsDType, type TensorToWrite } from '../formats/safetensors.ts';
import { pathOfFileUri } from './offline-manifest.ts';

export class FeatureStoreBudgetError extends Error {
  override name = 'FeatureStoreBudgetError';
}

/** A sample id, generation or feature name the store cannot serve. */
export class FeatureNotFoundError extends Error {
  override name = 'FeatureNotFoundError';
}

/** A spill file that cannot be written, or one on disk that is damaged or belongs to another sample. */
export class FeatureSpillError extends Error {
  override name = 'FeatureSpillError';
}

export interface FeatureStoreHealth {
  storeId: string;
  residentSamples: number;
  activeLeases: number;
  residentBytes: number;
  maxResidentBytes: number | null;
  /** Aborted samples whose buffers wait for their last reader. */
  pendingFrees: number;
  oldestAgeMs: number;
  forceFreedTotal: number;
  /** Spill counters; null without a spill. A failed delete leaves a file the next reconcile drops. */
  spill: { writes: number; bytesWritten: number; reads: number; deletes: number; failedDeletes: number; lastError: string | null } | null;
}

export interface LocalFeatureStoreOptions {
  storeId?: string;
  maxResidentBytes?: number;
  maxHoldAgeMs?: number;
  cloneOnGet?: boolean;
  clock?: () => number;
  /** Where `file://` refs (offline shards) are read from. */
  files?: FileStore;
  /** Durability tap: every put is written here before its ref exists (see the file comment). */
  spill?: FileStore;
}

export interface PutMetadata {
  runId?: string;
  sourceTaskId?: string | null;
  strategy?: DraftStrategyName;
  targetRepr?: TargetRepr;
  targetFeatureName?: string;
  vocabMapVersion?: string;
  numTokens?: number;
  targetModelVersion?: string;
  tokenizerVersion?: string;
  draftWeightVersion?: string | null;
  /** Anything else to carry on the ref (JSON only). */
  extra?: JsonRecord;
}

export interface FeatureStore {
  /** Resolves once the sample is stored (and, for a durable store, on disk); only then may it be committed. */
  put(tensors: Readonly<Record<string, Tensor>>, sampleId: string, metadata?: PutMetadata): Promise<SampleRef>;
  get(ref: SampleRef, names?: readonly string[]): Promise<{ tensors: Record<string, Tensor>; handle: FeatureHandle }>;
  release(handle: FeatureHandle): void;
  /** Evicts at once; a durable store's promise resolves once the sample's file is gone (it never rejects). */
  abort(sampleId: string): void | Promise<void>;
  gc(nowMs?: number): { forceFreed: number };
  health(): FeatureStoreHealth;
}

const DTYPE_NAMES: Record<Tensor['dtype'], string> = { f32: 'float32', f16: 'float16', i32: 'int32', u32: 'uint32' };

/** Safetensors dtype each GPU dtype is spilled as. u32 has no safetensors name: its bits go as I32 and the file records the GPU dtype. */
const SPILL_DTYPES: Record<DType, SafetensorsDType> = { f32: 'F32', f16: 'F16', i32: 'I32', u32: 'I32' };
const SPILL_FORMAT = 'speclab-feature-spill/1';
const SPILL_SUFFIX = '.safetensors';

/** Process-wide: a re-put of the same id in any store always gets a strictly larger generation. */
let lastGeneration = 0;

interface Resident {
  generation: number;
  tensors: Record<string, Tensor>;
  bytes: number;
  putAtMs: number;
  leases: Set<string>;
}

/** A validated spill file: raw little-endian bytes per tensor, as they were on the GPU. */
interface SpilledSample {
  generation: number;
  tensors: Record<string, { dtype: DType; shape: number[]; raw: Uint8Array }>;
  bytes: number;
}

export function memUri(storeId: string, sampleId: string, generation: number): string {
  return `mem://${encodeURIComponent(storeId)}/${encodeURIComponent(sampleId)}?generation=${generation}`;
}

export function parseMemUri(uri: string): { storeId: string; sampleId: string; generation: number } {
  const match = /^mem:\/\/([^/]+)\/([^?]+)\?generation=(\d+)$/.exec(uri);
  if (!match) throw new FeatureNotFoundError(`not a mem:// feature URI: ${uri}`);
  return { storeId: decodeURIComponent(match[1]), sampleId: decodeURIComponent(match[2]), generation: Number(match[3]) };
}

/** File name of a sample's spill: the quoted id, so any id is one safe path segment. */
export function spillPath(sampleId: string): string {
  return `${encodeURIComponent(sampleId)}${SPILL_SUFFIX}`;
}

export class LocalFeatureStore implements FeatureStore {
  readonly storeId: string;
  private readonly resident = new Map<string, Resident>();
  /** Aborted or superseded generations still leased: freed on their last release. */
  private readonly draining = new Map<string, Resident>();
  private leaseCounter = 0;
  /** Tensors uploaded for `file://` leases, freed by their release. */
  private readonly fileLeases = new Map<string, Record<string, Tensor>>();
  private forceFreedTotal = 0;
  private readonly clock: () => number;
  private readonly spill: FileStore | undefined;
  /** Puts whose spill write is in flight, by sample id; their bytes are reserved against the budget. */
  private readonly putting = new Map<string, { bytes: number; done: Promise<unknown> }>();
  /** Re-materialisations from the spill in flight, by `<id>#<generation>`, shared by concurrent getters. */
  private readonly loading = new Map<string, Promise<void>>();
  /** Bumped by every registered put and every abort of an id: work that awaited and finds it changed is void. */
  private readonly epochs = new Map<string, number>();
  private readonly spillStats = { writes: 0, bytesWritten: 0, reads: 0, deletes: 0, failedDeletes: 0, lastError: null as string | null };

  constructor(
    private readonly gpu: Gpu,
    private readonly options: LocalFeatureStoreOptions = {},
  ) {
    this.storeId = options.storeId ?? 'local';
    this.clock = options.clock ?? (() => performance.now());
    this.spill = options.spill;
    if (options.maxResidentBytes !== undefined && !(options.maxResidentBytes > 0)) {
      throw new RangeError(`LocalFeatureStore: maxResidentBytes must be positive, got ${options.maxResidentBytes}`);
    }
  }

  private residentBytes(): number {
    let n = 0;
    for (const r of this.resident.values()) n += r.bytes;
    for (const r of this.draining.values()) n += r.bytes;
    return n;
  }

  /** Throws (changing nothing) when adding `bytes` would pass the budget; `freed` = bytes the operation also lets go. */
  private checkBudget(bytes: number, freed: number, what: string): void {
    const limit = this.options.maxResidentBytes;
    if (limit === undefined) return;
    let reserved = 0;
    for (const p of this.putting.values()) reserved += p.bytes;
    const after = this.residentBytes() + reserved - freed + bytes;
    if (after > limit) {
      throw new FeatureStoreBudgetError(
        `${what}: ${bytes} bytes would bring the store "${this.storeId}" to ${after} bytes, over its budget of ${limit} (the consumer is behind; nothing was stored)`,
      );
    }
  }

  /**
   * Stores the sample and returns its ref. Without a spill the sample is registered before the first
   * await (the returned promise is already settled in effect); with one, only after its file is on disk.
   */
  async put(tensors: Readonly<Record<string, Tensor>>, sampleId: string, metadata: PutMetadata = {}): Promise<SampleRef> {
    if (typeof sampleId !== 'string' || sampleId.length === 0) throw new TypeError(`put: sampleId must be a non-empty string, got ${JSON.stringify(sampleId)}`);
    const names = Object.keys(tensors ?? {});
    if (names.length === 0) throw new TypeError(`put ${sampleId}: no tensors given`);
    let bytes = 0;
    for (const name of names) {
      const t = tensors[name];
      if (!(t instanceof Tensor)) throw new TypeError(`put ${sampleId}: feature "${name}" is not a GPU tensor (got ${describe(t)})`);
      if (!Object.hasOwn(DTYPE_NAMES, t.dtype)) throw new TypeError(`put ${sampleId}: feature "${name}" has unknown dtype ${JSON.stringify(t.dtype)}`);
      bytes += t.byteLength;
    }
    if (this.putting.has(sampleId)) throw new Error(`put ${sampleId}: an earlier put of this sample is still being written to the spill; await it first`);
    const replaced = this.resident.get(sampleId);
    this.checkBudget(bytes, replaced && replaced.leases.size === 0 ? replaced.bytes : 0, `put ${sampleId}`);
    const specs = specsOf(tensors, metadata);
    const spill = this.spill;
    if (!spill) return this.register(tensors, sampleId, metadata, specs, bytes, ++lastGeneration);

    const epoch = this.epochs.get(sampleId) ?? 0;
    const done = this.writeSpill(spill, tensors, sampleId);
    this.putting.set(sampleId, { bytes, done });
    let generation: number;
    try {
      generation = await done;
    } finally {
      this.putting.delete(sampleId);
    }
    if ((this.epochs.get(sampleId) ?? 0) !== epoch) {
      // abort() ran while the file was being written; it deletes the file once this write settles.
      throw new FeatureNotFoundError(`put ${sampleId}: the sample was aborted while its spill was being written; nothing was stored`);
    }
    return this.register(tensors, sampleId, metadata, specs, bytes, generation);
  }

  private register(tensors: Readonly<Record<string, Tensor>>, sampleId: string, metadata: PutMetadata, specs: Record<string, FeatureSpec>, bytes: number, generation: number): SampleRef {
    const names = Object.keys(tensors);
    const replaced = this.resident.get(sampleId);
    if (replaced) {
      // A re-put may hand back some of the same tensors; those must not be freed with the old generation.
      const kept = new Set(Object.values(tensors));
      const old = Object.fromEntries(Object.entries(replaced.tensors).filter(([, t]) => !kept.has(t)));
      this.retire(sampleId, { ...replaced, tensors: old });
    }
    this.bumpEpoch(sampleId);
    this.resident.set(sampleId, { generation, tensors: { ...tensors }, bytes, putAtMs: this.clock(), leases: new Set() });
    return sampleRefFor({
      sampleId,
      uri: memUri(this.storeId, sampleId, generation),
      featureKeys: Object.fromEntries(names.map((n) => [n, `${sampleId}/${n}`])),
      specs,
      bytes,
      metadata,
    });
  }

  async get(ref: SampleRef, names?: readonly string[]): Promise<{ tensors: Record<string, Tensor>; handle: FeatureHandle }> {
    if (ref.featureStoreUri.startsWith('file://')) return this.getFile(ref, names);
    const { storeId, sampleId, generation } = parseMemUri(ref.featureStoreUri);
    if (storeId !== this.storeId) throw new FeatureNotFoundError(`sample ${ref.sampleId} lives in store "${storeId}", not "${this.storeId}"`);
    if (this.spill && !this.resident.has(sampleId)) await this.materialise(this.spill, sampleId, generation);
    // Resident check, generation check and lease registration happen in one synchronous section,
    // so no abort or re-put can interleave between them.
    const entry = this.resident.get(sampleId);
    if (!entry) throw new FeatureNotFoundError(`sample ${sampleId} is not resident in store "${this.storeId}" (consumed, aborted, evicted or never put)`);
    if (entry.generation !== generation) {
      throw new FeatureNotFoundError(`stale ref for sample ${sampleId}: generation ${generation}, resident generation ${entry.generation}`);
    }
    const wanted = names ?? Object.keys(ref.featureKeys);
    for (const name of wanted) {
      if (!(name in entry.tensors)) throw new FeatureNotFoundError(`sample ${sampleId} has no feature "${name}" (has ${Object.keys(entry.tensors).join(', ')})`);
    }
    const leaseToken = `${sampleId}:${generation}:${++this.leaseCounter}`;
    entry.leases.add(leaseToken);
    const handle = makeFeatureHandle({ sampleId, generation, leaseToken });
    try {
      const tensors: Record<string, Tensor> = {};
      for (const name of wanted) tensors[name] = this.options.cloneOnGet ? this.gpu.clone(entry.tensors[name]) : entry.tensors[name];
      return { tensors, handle };
    } catch (err) {
      this.release(handle);
      throw err;
    }
  }

  /**
   * Re-materialises a spilled sample that is not resident (consumed before a retry, or put by a
   * process that crashed) under the generation its file records, so the caller's ref stays valid.
   */
  private async materialise(spill: FileStore, sampleId: string, generation: number): Promise<void> {
    const key = `${sampleId}#${generation}`;
    let pending = this.loading.get(key);
    if (!pending) {
      pending = this.loadSpilled(spill, sampleId, generation).finally(() => this.loading.delete(key));
      this.loading.set(key, pending);
    }
    await pending;
  }

  private async loadSpilled(spill: FileStore, sampleId: string, generation: number): Promise<void> {
    const epoch = this.epochs.get(sampleId) ?? 0;
    const spilled = await this.readSpill(spill, sampleId, `get ${sampleId}`);
    if (spilled.generation !== generation) {
      throw new FeatureNotFoundError(`stale ref for sample ${sampleId}: generation ${generation}, spilled generation ${spilled.generation}`);
    }
    lastGeneration = Math.max(lastGeneration, spilled.generation);
    // A put or an abort of this id ran while the file was read: its outcome wins.
    if (this.resident.has(sampleId) || (this.epochs.get(sampleId) ?? 0) !== epoch) return;
    this.checkBudget(spilled.bytes, 0, `get ${sampleId} (re-materialising it from the spill)`);
    this.resident.set(sampleId, { generation, tensors: this.upload(spilled), bytes: spilled.bytes, putAtMs: this.clock(), leases: new Set() });
  }

  /**
   * Takes over a spilled sample named by a ref from an earlier process: re-materialises it into GPU
   * residency under a fresh generation (its file is rewritten to match) and returns the fresh ref.
   * A ref already resident here is returned as is; undefined means there is nothing left to adopt
   * (the sample was released and its file deleted). The refs of a restarted controller do not need
   * this (get falls back to the spill); reconcileOnRestart calls it only for released samples.
   */
  async adopt(ref: SampleRef): Promise<SampleRef | undefined> {
    if (ref.featureStoreUri.startsWith('file://')) return ref;
    const { storeId, sampleId, generation } = parseMemUri(ref.featureStoreUri);
    if (storeId !== this.storeId) throw new FeatureNotFoundError(`adopt ${ref.sampleId}: the sample lives in store "${storeId}", not "${this.storeId}"`);
    const entry = this.resident.get(sampleId);
    if (entry) {
      if (entry.generation !== generation) throw new FeatureNotFoundError(`adopt ${sampleId}: stale ref, generation ${generation}, resident generation ${entry.generation}`);
      return ref;
    }
    const spill = this.spill;
    if (!spill) throw new FeatureNotFoundError(`adopt ${sampleId}: not resident in store "${this.storeId}", which has no spill to re-materialise it from`);
    const path = spillPath(sampleId);
    if (!(await spill.exists(path))) return undefined;
    const epoch = this.epochs.get(sampleId) ?? 0;
    const spilled = await this.readSpill(spill, sampleId, `adopt ${sampleId}`);
    if (spilled.generation !== generation) {
      throw new FeatureNotFoundError(`adopt ${sampleId}: stale ref, generation ${generation}, spilled generation ${spilled.generation}`);
    }
    this.checkBudget(spilled.bytes, 0, `adopt ${sampleId}`);
    lastGeneration = Math.max(lastGeneration, spilled.generation);
    const fresh = ++lastGeneration;
    // The file must carry the fresh generation, or a later fallback get of the fresh ref would be refused as stale.
    await this.writeSpillImage(spill, sampleId, encodeSpill(this.storeId, sampleId, fresh, spilled.tensors), `adopt ${sampleId}`);
    if (this.resident.has(sampleId) || (this.epochs.get(sampleId) ?? 0) !== epoch) {
      throw new FeatureNotFoundError(`adopt ${sampleId}: the sample was re-put or aborted while it was being adopted`);
    }
    this.bumpEpoch(sampleId);
    this.resident.set(sampleId, { generation: fresh, tensors: this.upload(spilled), bytes: spilled.bytes, putAtMs: this.clock(), leases: new Set() });
    return makeSampleRef({ ...ref, featureStoreUri: memUri(this.storeId, sampleId, fresh) });
  }

  /**
   * A `file://` ref is read on every get (never resident; offline refs are re-iterable each epoch).
   * The uploaded tensors belong to the lease: release frees them.
   */
  private async getFile(ref: SampleRef, names?: readonly string[]): Promise<{ tensors: Record<string, Tensor>; handle: FeatureHandle }> {
    const files = this.options.files;
    if (!files) throw new FeatureNotFoundError(`sample ${ref.sampleId} is a file ref (${ref.featureStoreUri}) but the store "${this.storeId}" has no file root`);
    const path = pathOfFileUri(files, ref.featureStoreUri);
    let shard: SafetensorsFile;
    try {
      shard = new SafetensorsFile(await files.read(path), `${files.root}/${path}`);
    } catch (err) {
      throw new FeatureNotFoundError(`sample ${ref.sampleId}: cannot read feature file ${files.root}/${path}: ${(err as Error).message}`, { cause: err });
    }
    const tensors: Record<string, Tensor> = {};
    try {
      for (const name of names ?? Object.keys(ref.featureKeys)) {
        const key = ref.featureKeys[name] ?? name;
        if (!shard.has(key)) throw new FeatureNotFoundError(`feature file ${files.root}/${path} (sample ${ref.sampleId}) has no tensor "${key}" (has ${shard.names.join(', ')})`);
        const entry = shard.entry(key);
        const isFloat = entry.dtype === 'F32' || entry.dtype === 'F16' || entry.dtype === 'BF16' || entry.dtype === 'F64';
        const shape = entry.shape.length === 0 ? [1] : [...entry.shape];
        tensors[name] = isFloat ? this.gpu.upload(shape, 'f32', shard.f32(key), name) : this.gpu.upload(shape, 'i32', shard.i32(key), name);
      }
    } catch (err) {
      this.gpu.release(...Object.values(tensors));
      throw err;
    }
    const leaseToken = `${ref.sampleId}:0:${++this.leaseCounter}`;
    this.fileLeases.set(leaseToken, tensors);
    return { tensors, handle: makeFeatureHandle({ sampleId: ref.sampleId, generation: 0, leaseToken }) };
  }

  release(handle: FeatureHandle): void {
    const fileTensors = this.fileLeases.get(handle.leaseToken);
    if (fileTensors) {
      this.fileLeases.delete(handle.leaseToken);
      this.gpu.release(...Object.values(fileTensors));
      return;
    }
    const entry = this.resident.get(handle.sampleId);
    if (entry && entry.generation === handle.generation) {
      if (!entry.leases.delete(handle.leaseToken)) return; // idempotent
      if (entry.leases.size === 0) {
        // With a spill only the GPU copy goes: the file keeps the sample until abort (the durable ack).
        this.resident.delete(handle.sampleId);
        this.free(entry);
      }
      return;
    }
    // A lease on a retired generation: the last one lets its buffers go.
    const key = `${handle.sampleId}#${handle.generation}`;
    const old = this.draining.get(key);
    if (old && old.leases.delete(handle.leaseToken) && old.leases.size === 0) {
      this.draining.delete(key);
      this.free(old);
    }
  }

  /**
   * Evicts at once for new readers and, with a spill, deletes the sample's file. The promise
   * resolves when the file is gone and never rejects: a file that cannot be deleted is counted in
   * health().spill and dropped by the next reconcile (it only costs disk space).
   */
  abort(sampleId: string): Promise<void> {
    this.bumpEpoch(sampleId);
    const entry = this.resident.get(sampleId);
    if (entry) {
      this.resident.delete(sampleId);
      this.retire(sampleId, entry);
    }
    const spill = this.spill;
    if (!spill) return Promise.resolve();
    return this.deleteSpill(spill, sampleId, this.putting.get(sampleId)?.done);
  }

  private async deleteSpill(spill: FileStore, sampleId: string, inflightWrite?: Promise<unknown>): Promise<void> {
    // A put still writing this id would otherwise land its file after the delete.
    await inflightWrite?.catch(() => {});
    try {
      await spill.remove(spillPath(sampleId));
      this.spillStats.deletes++;
    } catch (err) {
      this.spillStats.failedDeletes++;
      this.spillStats.lastError = `delete ${spill.root}/${spillPath(sampleId)}: ${(err as Error).message}`;
    }
  }

  /** Sample ids that have a spill file (any generation). */
  async spilledSampleIds(): Promise<string[]> {
    if (!this.spill) return [];
    const ids: string[] = [];
    for (const name of await this.spill.list('')) {
      const id = sampleIdOfSpill(name);
      if (id !== undefined) ids.push(id);
    }
    return ids;
  }

  /**
   * Restart clean-up: deletes the spill files of samples that were never committed (a crash between
   * put and commit; the producer retries them under the same id) and leftovers of interrupted
   * atomic writes. Run before producers start: a concurrent put's file would look uncommitted.
   */
  async dropUncommittedSpills(committed: ReadonlySet<string>): Promise<string[]> {
    const spill = this.spill;
    if (!spill) return [];
    const dropped: string[] = [];
    for (const name of await spill.list('')) {
      if (name.includes(`${SPILL_SUFFIX}.tmp-`)) {
        await spill.remove(name);
        continue;
      }
      const id = sampleIdOfSpill(name);
      if (id === undefined || committed.has(id) || this.resident.has(id) || this.putting.has(id)) continue;
      await spill.remove(name);
      dropped.push(id);
    }
    return dropped;
  }

  gc(nowMs = this.clock()): { forceFreed: number } {
    const maxAge = this.options.maxHoldAgeMs;
    if (maxAge === undefined) return { forceFreed: 0 };
    let forceFreed = 0;
    for (const [id, entry] of [...this.resident]) {
      if (entry.leases.size === 0 && nowMs - entry.putAtMs > maxAge) {
        this.resident.delete(id);
        this.free(entry);
        forceFreed++;
      }
    }
    this.forceFreedTotal += forceFreed;
    return { forceFreed };
  }

  health(): FeatureStoreHealth {
    let leases = 0;
    let oldest = 0;
    const now = this.clock();
    for (const r of this.resident.values()) {
      leases += r.leases.size;
      oldest = Math.max(oldest, now - r.putAtMs);
    }
    for (const r of this.draining.values()) leases += r.leases.size;
    leases += this.fileLeases.size;
    return {
      storeId: this.storeId,
      residentSamples: this.resident.size,
      activeLeases: leases,
      residentBytes: this.residentBytes(),
      maxResidentBytes: this.options.maxResidentBytes ?? null,
      pendingFrees: this.draining.size,
      oldestAgeMs: oldest,
      forceFreedTotal: this.forceFreedTotal,
      spill: this.spill ? { ...this.spillStats } : null,
    };
  }

  /** Reads the tensors back and writes the spill file; resolves to the generation the file records. */
  private async writeSpill(spill: FileStore, tensors: Readonly<Record<string, Tensor>>, sampleId: string): Promise<number> {
    // After a restart the counter starts again at 1: a re-put must still outrank the file it replaces.
    const previous = await spilledGeneration(spill, spillPath(sampleId));
    if (previous !== null) lastGeneration = Math.max(lastGeneration, previous);
    const generation = ++lastGeneration;
    const names = Object.keys(tensors);
    const reads = names.map((name) => this.gpu.readLater(tensors[name]));
    this.gpu.batcher.flush();
    const host = await Promise.all(reads);
    const contents: SpilledSample['tensors'] = {};
    names.forEach((name, i) => {
      const t = tensors[name];
      contents[name] = { dtype: t.dtype, shape: [...t.shape], raw: new Uint8Array(host[i].buffer, host[i].byteOffset, t.byteLength) };
    });
    const image = encodeSpill(this.storeId, sampleId, generation, contents);
    await this.writeSpillImage(spill, sampleId, image, `put ${sampleId}`);
    return generation;
  }

  private async writeSpillImage(spill: FileStore, sampleId: string, image: Uint8Array, what: string): Promise<void> {
    const path = spillPath(sampleId);
    try {
      await spill.writeAtomic(path, image);
    } catch (err) {
      this.spillStats.lastError = `write ${spill.root}/${path}: ${(err as Error).message}`;
      throw new FeatureSpillError(`${what}: writing the spill file ${spill.root}/${path} failed, nothing was stored: ${(err as Error).message}`, { cause: err });
    }
    this.spillStats.writes++;
    this.spillStats.bytesWritten += image.byteLength;
  }

  /** Reads and validates a spill file; a damaged one is left in place and reported with its path. */
  private async readSpill(spill: FileStore, sampleId: string, what: string): Promise<SpilledSample> {
    const path = spillPath(sampleId);
    const source = `${spill.root}/${path}`;
    let bytes: Uint8Array;
    try {
      bytes = await spill.read(path);
    } catch (err) {
      if (!(await spill.exists(path))) {
        throw new FeatureNotFoundError(`${what}: sample ${sampleId} is not resident in store "${this.storeId}" and has no spill file ${source} (released after its durable ack, aborted, or never put)`);
      }
      throw new FeatureSpillError(`${what}: cannot read the spill file ${source}: ${(err as Error).message}`, { cause: err });
    }
    const spilled = decodeSpill(bytes, sampleId, source, what);
    this.spillStats.reads++;
    return spilled;
  }

  private upload(spilled: SpilledSample): Record<string, Tensor> {
    const tensors: Record<string, Tensor> = {};
    try {
      for (const [name, t] of Object.entries(spilled.tensors)) tensors[name] = this.gpu.upload(t.shape, t.dtype, hostView(t.dtype, t.raw), name);
    } catch (err) {
      this.gpu.release(...Object.values(tensors));
      throw err;
    }
    return tensors;
  }

  private bumpEpoch(sampleId: string): void {
    this.epochs.set(sampleId, (this.epochs.get(sampleId) ?? 0) + 1);
  }

  /** Free now if unleased, else park until the last lease is released. */
  private retire(sampleId: string, entry: Resident): void {
    if (entry.leases.size === 0) this.free(entry);
    else this.draining.set(`${sampleId}#${entry.generation}`, entry);
  }

  private free(entry: Resident): void {
    this.gpu.release(...Object.values(entry.tensors));
  }
}

/** The ref of a stored sample: one construction for every FeatureStore, so refs never differ by store. */
export function sampleRefFor(x: {
  sampleId: string;
  uri: string;
  featureKeys: Record<string, string>;
  specs: Record<string, FeatureSpec>;
  bytes: number;
  metadata: PutMetadata;
}): SampleRef {
  const m = x.metadata;
  const refMetadata: JsonRecord = { ...(m.extra ?? {}) };
  if (m.targetRepr) refMetadata.target_repr = m.targetRepr;
  if (m.vocabMapVersion) refMetadata.vocab_map_version = m.vocabMapVersion;
  return makeSampleRef({
    sampleId: x.sampleId,
    runId: m.runId ?? 'unknown',
    sourceTaskId: m.sourceTaskId ?? null,
    featureStoreUri: x.uri,
    featureKeys: x.featureKeys,
    featureSpecs: x.specs,
    strategy: m.strategy ?? 'eagle3',
    targetModelVersion: m.targetModelVersion ?? 'unknown',
    tokenizerVersion: m.tokenizerVersion ?? 'unknown',
    draftWeightVersion: m.draftWeightVersion ?? null,
    numTokens: m.numTokens ?? 0,
    estimatedBytes: x.bytes,
    metadata: refMetadata,
  });
}

/** FeatureSpecs of a sample's tensors; the target feature carries its representation and vocab map. */
export function specsOf(tensors: Readonly<Record<string, Tensor>>, metadata: PutMetadata): Record<string, FeatureSpec> {
  const targetName = metadata.targetFeatureName ?? 'target';
  const specs: Record<string, FeatureSpec> = {};
  for (const [name, t] of Object.entries(tensors)) {
    const isTarget = name === targetName && metadata.targetRepr !== undefined;
    specs[name] = makeFeatureSpec({
      name,
      shape: [...t.shape],
      dtype: DTYPE_NAMES[t.dtype],
      targetRepr: isTarget ? metadata.targetRepr : null,
      targetMeta: isTarget && metadata.vocabMapVersion ? { vocab_map_version: metadata.vocabMapVersion } : {},
    });
  }
  return specs;
}

function describe(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? String(value);
  return value.constructor?.name ?? 'object';
}

/** The sample id a spill file name stands for, or undefined for anything else in the folder. */
function sampleIdOfSpill(name: string): string | undefined {
  if (!name.endsWith(SPILL_SUFFIX)) return undefined;
  try {
    return decodeURIComponent(name.slice(0, -SPILL_SUFFIX.length));
  } catch {
    return undefined;
  }
}

function encodeSpill(storeId: string, sampleId: string, generation: number, tensors: SpilledSample['tensors']): Uint8Array {
  const entries: Record<string, TensorToWrite> = {};
  const dtypes: Record<string, DType> = {};
  for (const [name, t] of Object.entries(tensors)) {
    entries[name] = { dtype: SPILL_DTYPES[t.dtype], shape: t.shape, data: t.raw };
    dtypes[name] = t.dtype;
  }
  return writeSafetensors(entries, { format: SPILL_FORMAT, sample_id: sampleId, store_id: storeId, generation: String(generation), dtypes: JSON.stringify(dtypes) });
}

/** Validates a spill file image against the sample it should hold; every failure names the file. */
function decodeSpill(bytes: Uint8Array, sampleId: string, source: string, what: string): SpilledSample {
  const damaged = (why: string): never => {
    throw new FeatureSpillError(`${what}: the spill file ${source} of sample ${sampleId} is damaged (${why}); it is left in place`);
  };
  let file: SafetensorsFile | undefined;
  try {
    file = new SafetensorsFile(bytes, source);
  } catch (err) {
    damaged((err as Error).message);
  }
  const meta = file!.header.metadata;
  if (meta.format !== SPILL_FORMAT) damaged(`not a ${SPILL_FORMAT} file (format ${JSON.stringify(meta.format)})`);
  if (meta.sample_id !== sampleId) damaged(`it holds sample ${JSON.stringify(meta.sample_id)}`);
  const generation = Number(meta.generation);
  if (!Number.isSafeInteger(generation) || generation < 1) damaged(`generation ${JSON.stringify(meta.generation)}`);
  let dtypes: Record<string, unknown> = {};
  try {
    dtypes = JSON.parse(meta.dtypes ?? '') as Record<string, unknown>;
  } catch {
    damaged('its dtype table is not JSON');
  }
  const tensors: SpilledSample['tensors'] = {};
  let total = 0;
  for (const name of file!.names) {
    const entry = file!.entry(name);
    const dtype = dtypes[name];
    if (typeof dtype !== 'string' || !Object.hasOwn(SPILL_DTYPES, dtype) || SPILL_DTYPES[dtype as DType] !== entry.dtype) {
      damaged(`tensor "${name}" is stored as ${entry.dtype} but recorded as ${JSON.stringify(dtype)}`);
    }
    const raw = file!.raw(name);
    const numel = entry.shape.reduce((a, d) => a * d, 1);
    if (raw.byteLength !== numel * BYTES_PER_ELEMENT[dtype as DType]) damaged(`tensor "${name}" has ${raw.byteLength} bytes for shape [${entry.shape}]`);
    tensors[name] = { dtype: dtype as DType, shape: [...entry.shape], raw };
    total += raw.byteLength;
  }
  if (Object.keys(tensors).length === 0) damaged('it holds no tensors');
  return { generation, tensors, bytes: total };
}

/** The generation recorded in an existing spill file, or null when there is none (or it is unreadable). */
async function spilledGeneration(spill: FileStore, path: string): Promise<number | null> {
  if (!(await spill.exists(path))) return null;
  try {
    const reader = await SafetensorsReader.open(spill, path);
    const generation = Number(reader.header.metadata.generation);
    return Number.isSafeInteger(generation) ? generation : null;
  } catch {
    return null;
  }
}

/** A typed view of raw little-endian bytes (aligned: SafetensorsFile.raw and readbacks copy). */
function hostView(dtype: DType, raw: Uint8Array): ArrayLike<number> {
  const aligned = raw.byteOffset % 4 === 0 ? raw : raw.slice();
  const n = aligned.byteLength / BYTES_PER_ELEMENT[dtype];
  switch (dtype) {
    case 'f32':
      return new Float32Array(aligned.buffer, aligned.byteOffset, n);
    case 'i32':
      return new Int32Array(aligned.buffer, aligned.byteOffset, n);
    case 'u32':
      return new Uint32Array(aligned.buffer, aligned.byteOffset, n);
    case 'f16':
      return new Uint16Array(aligned.buffer, aligned.byteOffset, n);
  }
}
