/**
 * The data plane's tensor holder: a GPU-resident feature store addressed by metadata-only SampleRefs
 * (docs/features.md §1–§2, with SpecForge's later runtime's reclamation fixes). This module owns the
 * store's operations and their order against the spill (what a put, get, adopt or abort that awaits
 * may find changed); the books of GPU residency (leases, retired generations, bytes held) are
 * resident-samples.ts, the disk format of the spill is feature-spill.ts and offline `file://` shards
 * are offline-shards.ts.
 *
 * - `put` takes ownership of the caller's GPU tensors (no copy) after checking the byte budget
 *   BEFORE insertion: an over-budget put changes nothing and the caller still owns its tensors.
 * - Every (re)put gets the next value of the store's GenerationClock; the ref's URI carries it, so
 *   a ref from before a re-put is stale and `get` rejects it.
 * - `get` registers a lease and returns the stored tensors by reference, or GPU copies when
 *   `cloneOnGet` is set (the loader clones itself and releases right after the copy).
 * - Consume-once: the release of the last lease on the current generation frees the sample.
 * - `abort` evicts at once for new readers; the GPU buffers themselves are returned to the pool only
 *   when no lease holder can still read them (unlike a Python tensor, a pooled GPU buffer would be
 *   reused under a reader's feet).
 * - `gc` force-frees unleased samples held longer than `maxHoldAgeMs`.
 *
 * Spill (optional `spill: FileStore`, docs/durability.md §6): with one, `put` registers the sample and
 * returns its ref only once its file is on disk (feature-spill.ts says how and at what cost).
 * With a spill the release of the last lease frees the GPU buffers but keeps the file: the sample
 * stays gettable until `abort` (which the controller calls after the durable ack) deletes it.
 * Recovery choice: `get` falls back to the spill. A ref whose sample is not resident is
 * re-materialised from its file when the file's recorded generation equals the ref's, so the refs
 * a restarted controller requeues (the ones in the metadata store) stay valid as they are, a
 * retryable failure that requeues the committed ref still works, and nothing is loaded before a
 * trainer asks for it (no GPU memory spike at restart). `adopt` re-materialises eagerly with a fresh
 * generation for callers that want that instead.
 */
import { makeFeatureHandle, makeSampleRef, type FeatureHandle, type FeatureSpec, type SampleRef } from '../contracts/index.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';
import type { FileStore } from '../ports/storage.ts';
import {
  FeatureNotFoundError,
  FeatureStoreBudgetError,
  GenerationClock,
  featureBytes,
  memUri,
  parseMemUri,
  sampleRefFor,
  specsOf,
  type FeatureStore,
  type FeatureStoreHealth,
  type PutMetadata,
} from './feature-store.ts';
import { FeatureSpill } from './feature-spill.ts';
import { OfflineShards, isShardRef } from './offline-shards.ts';
import { ResidentSamples } from './resident-samples.ts';

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
  /** Where generations come from; by default the store's own. Share one between stores that serve the same ids. */
  generations?: GenerationClock;
}

export class LocalFeatureStore implements FeatureStore {
  readonly storeId: string;
  /** GPU residency: resident generations, their leases, and retired ones waiting for their last reader. */
  private readonly resident: ResidentSamples;
  private leaseCounter = 0;
  private readonly shards: OfflineShards;
  private readonly clock: () => number;
  private readonly generations: GenerationClock;
  private readonly spill: FeatureSpill | undefined;
  /** Puts whose spill write is in flight, by sample id; their bytes are reserved against the budget. */
  private readonly putting = new Map<string, { bytes: number; done: Promise<unknown> }>();
  /** Re-materialisations from the spill in flight, by `<id>#<generation>`, shared by concurrent getters. */
  private readonly loading = new Map<string, Promise<void>>();
  /** Bumped by every registered put and every abort of an id: work that awaited and finds it changed is void. */
  private readonly epochs = new Map<string, number>();

  constructor(
    private readonly gpu: Gpu,
    private readonly options: LocalFeatureStoreOptions = {},
  ) {
    this.storeId = options.storeId ?? 'local';
    this.resident = new ResidentSamples(gpu);
    this.clock = options.clock ?? (() => performance.now());
    this.generations = options.generations ?? new GenerationClock();
    this.spill = options.spill ? new FeatureSpill(options.spill, gpu, this.storeId, this.generations) : undefined;
    this.shards = new OfflineShards(gpu, options.files, this.storeId);
    if (options.maxResidentBytes !== undefined && !(options.maxResidentBytes > 0)) {
      throw new RangeError(`LocalFeatureStore: maxResidentBytes must be positive, got ${options.maxResidentBytes}`);
    }
  }

  /** Throws (changing nothing) when adding `bytes` would pass the budget; `freed` = bytes the operation also lets go. */
  private checkBudget(bytes: number, freed: number, what: string): void {
    const limit = this.options.maxResidentBytes;
    if (limit === undefined) return;
    let reserved = 0;
    for (const p of this.putting.values()) reserved += p.bytes;
    const after = this.resident.bytes() + reserved - freed + bytes;
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
    if (typeof sampleId !== 'string' || sampleId.length === 0)
      throw new TypeError(`put: sampleId must be a non-empty string, got ${JSON.stringify(sampleId)}`);
    const bytes = featureBytes(tensors, sampleId);
    if (this.putting.has(sampleId))
      throw new Error(`put ${sampleId}: an earlier put of this sample is still being written to the spill; await it first`);
    const replaced = this.resident.get(sampleId);
    this.checkBudget(bytes, replaced && replaced.leases.size === 0 ? replaced.bytes : 0, `put ${sampleId}`);
    const specs = specsOf(tensors, metadata);
    const spill = this.spill;
    if (!spill) return this.register(tensors, sampleId, metadata, specs, bytes, this.generations.next());

    const epoch = this.epochs.get(sampleId) ?? 0;
    const done = spill.write(tensors, sampleId);
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

  private register(
    tensors: Readonly<Record<string, Tensor>>,
    sampleId: string,
    metadata: PutMetadata,
    specs: Record<string, FeatureSpec>,
    bytes: number,
    generation: number,
  ): SampleRef {
    const names = Object.keys(tensors);
    const replaced = this.resident.get(sampleId);
    if (replaced) {
      // A re-put may hand back some of the same tensors; those must not be freed with the old generation.
      const kept = new Set(Object.values(tensors));
      const old = Object.fromEntries(Object.entries(replaced.tensors).filter(([, t]) => !kept.has(t)));
      this.resident.retire(sampleId, { ...replaced, tensors: old });
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
    if (isShardRef(ref)) return this.shards.get(ref, names, () => ++this.leaseCounter);
    const { storeId, sampleId, generation } = parseMemUri(ref.featureStoreUri);
    if (storeId !== this.storeId)
      throw new FeatureNotFoundError(`sample ${ref.sampleId} lives in store "${storeId}", not "${this.storeId}"`);
    if (this.spill && !this.resident.has(sampleId)) await this.materialise(this.spill, sampleId, generation);
    // Resident check, generation check and lease registration happen in one synchronous section,
    // so no abort or re-put can interleave between them.
    const entry = this.resident.get(sampleId);
    if (!entry)
      throw new FeatureNotFoundError(
        `sample ${sampleId} is not resident in store "${this.storeId}" (consumed, aborted, evicted or never put)`,
      );
    if (entry.generation !== generation) {
      throw new FeatureNotFoundError(`stale ref for sample ${sampleId}: generation ${generation}, resident generation ${entry.generation}`);
    }
    const wanted = names ?? Object.keys(ref.featureKeys);
    for (const name of wanted) {
      if (!(name in entry.tensors))
        throw new FeatureNotFoundError(`sample ${sampleId} has no feature "${name}" (has ${Object.keys(entry.tensors).join(', ')})`);
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
  private async materialise(spill: FeatureSpill, sampleId: string, generation: number): Promise<void> {
    const key = `${sampleId}#${generation}`;
    let pending = this.loading.get(key);
    if (!pending) {
      pending = this.loadSpilled(spill, sampleId, generation).finally(() => this.loading.delete(key));
      this.loading.set(key, pending);
    }
    await pending;
  }

  private async loadSpilled(spill: FeatureSpill, sampleId: string, generation: number): Promise<void> {
    const epoch = this.epochs.get(sampleId) ?? 0;
    const spilled = await spill.read(sampleId, `get ${sampleId}`);
    if (spilled.generation !== generation) {
      throw new FeatureNotFoundError(
        `stale ref for sample ${sampleId}: generation ${generation}, spilled generation ${spilled.generation}`,
      );
    }
    this.generations.observe(spilled.generation);
    // A put or an abort of this id ran while the file was read: its outcome wins.
    if (this.resident.has(sampleId) || (this.epochs.get(sampleId) ?? 0) !== epoch) return;
    this.checkBudget(spilled.bytes, 0, `get ${sampleId} (re-materialising it from the spill)`);
    this.resident.set(sampleId, {
      generation,
      tensors: spill.upload(spilled),
      bytes: spilled.bytes,
      putAtMs: this.clock(),
      leases: new Set(),
    });
  }

  /**
   * Takes over a spilled sample named by a ref from an earlier process: re-materialises it into GPU
   * residency under a fresh generation (its file is rewritten to match) and returns the fresh ref.
   * A ref already resident here is returned as is; undefined means there is nothing left to adopt
   * (the sample was released and its file deleted). The refs of a restarted controller do not need
   * this (get falls back to the spill); reconcileOnRestart calls it only for released samples.
   */
  async adopt(ref: SampleRef): Promise<SampleRef | undefined> {
    if (isShardRef(ref)) return ref;
    const { storeId, sampleId, generation } = parseMemUri(ref.featureStoreUri);
    if (storeId !== this.storeId)
      throw new FeatureNotFoundError(`adopt ${ref.sampleId}: the sample lives in store "${storeId}", not "${this.storeId}"`);
    const entry = this.resident.get(sampleId);
    if (entry) {
      if (entry.generation !== generation)
        throw new FeatureNotFoundError(`adopt ${sampleId}: stale ref, generation ${generation}, resident generation ${entry.generation}`);
      return ref;
    }
    const spill = this.spill;
    if (!spill)
      throw new FeatureNotFoundError(
        `adopt ${sampleId}: not resident in store "${this.storeId}", which has no spill to re-materialise it from`,
      );
    if (!(await spill.exists(sampleId))) return undefined;
    const epoch = this.epochs.get(sampleId) ?? 0;
    const spilled = await spill.read(sampleId, `adopt ${sampleId}`);
    if (spilled.generation !== generation) {
      throw new FeatureNotFoundError(`adopt ${sampleId}: stale ref, generation ${generation}, spilled generation ${spilled.generation}`);
    }
    this.checkBudget(spilled.bytes, 0, `adopt ${sampleId}`);
    this.generations.observe(spilled.generation);
    const fresh = this.generations.next();
    // The file must carry the fresh generation, or a later fallback get of the fresh ref would be refused as stale.
    await spill.rewrite(sampleId, fresh, spilled, `adopt ${sampleId}`);
    if (this.resident.has(sampleId) || (this.epochs.get(sampleId) ?? 0) !== epoch) {
      throw new FeatureNotFoundError(`adopt ${sampleId}: the sample was re-put or aborted while it was being adopted`);
    }
    this.bumpEpoch(sampleId);
    this.resident.set(sampleId, {
      generation: fresh,
      tensors: spill.upload(spilled),
      bytes: spilled.bytes,
      putAtMs: this.clock(),
      leases: new Set(),
    });
    return makeSampleRef({ ...ref, featureStoreUri: memUri(this.storeId, sampleId, fresh) });
  }

  release(handle: FeatureHandle): void {
    if (this.shards.release(handle)) return;
    this.resident.release(handle);
  }

  /**
   * Evicts at once for new readers and, with a spill, deletes the sample's file. The promise
   * resolves when the file is gone and never rejects: a file that cannot be deleted is counted in
   * health().spill and dropped by the next reconcile (it only costs disk space).
   */
  abort(sampleId: string): Promise<void> {
    this.bumpEpoch(sampleId);
    this.resident.evict(sampleId);
    const spill = this.spill;
    if (!spill) return Promise.resolve();
    return spill.delete(sampleId, this.putting.get(sampleId)?.done);
  }

  /** Sample ids that have a spill file (any generation). */
  async spilledSampleIds(): Promise<string[]> {
    if (!this.spill) return [];
    return this.spill.sampleIds();
  }

  /**
   * Restart clean-up: deletes the spill files of samples that were never committed (a crash between
   * put and commit; the producer retries them under the same id) and leftovers of interrupted
   * atomic writes. Run before producers start: a concurrent put's file would look uncommitted.
   */
  async dropUncommittedSpills(committed: ReadonlySet<string>): Promise<string[]> {
    const spill = this.spill;
    if (!spill) return [];
    return spill.dropUncommitted(committed, (id) => this.resident.has(id) || this.putting.has(id));
  }

  gc(nowMs = this.clock()): { forceFreed: number } {
    const maxAge = this.options.maxHoldAgeMs;
    if (maxAge === undefined) return { forceFreed: 0 };
    return { forceFreed: this.resident.sweep(nowMs, maxAge) };
  }

  health(): FeatureStoreHealth {
    const r = this.resident.stats(this.clock());
    return {
      storeId: this.storeId,
      residentSamples: r.residentSamples,
      activeLeases: r.leases + this.shards.activeLeases,
      residentBytes: this.resident.bytes(),
      maxResidentBytes: this.options.maxResidentBytes ?? null,
      pendingFrees: r.pendingFrees,
      oldestAgeMs: r.oldestAgeMs,
      forceFreedTotal: r.forceFreedTotal,
      spill: this.spill ? this.spill.stats() : null,
    };
  }

  private bumpEpoch(sampleId: string): void {
    this.epochs.set(sampleId, (this.epochs.get(sampleId) ?? 0) + 1);
  }
}
