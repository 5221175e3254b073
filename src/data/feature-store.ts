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
 */
import { makeFeatureHandle, makeFeatureSpec, makeSampleRef, type FeatureHandle, type FeatureSpec, type SampleRef } from '../contracts/index.ts';
import type { JsonRecord } from '../contracts/records.ts';
import type { DraftStrategyName, TargetRepr } from '../contracts/enums.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';
import type { FileStore } from '../platform/platform.ts';
import { SafetensorsFile } from './safetensors.ts';
import { pathOfFileUri } from './offline-manifest.ts';

export class FeatureStoreBudgetError extends Error {
  override name = 'FeatureStoreBudgetError';
}

/** A sample id, generation or feature name the store cannot serve. */
export class FeatureNotFoundError extends Error {
  override name = 'FeatureNotFoundError';
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
  put(tensors: Readonly<Record<string, Tensor>>, sampleId: string, metadata?: PutMetadata): SampleRef;
  get(ref: SampleRef, names?: readonly string[]): Promise<{ tensors: Record<string, Tensor>; handle: FeatureHandle }>;
  release(handle: FeatureHandle): void;
  abort(sampleId: string): void;
  gc(nowMs?: number): { forceFreed: number };
  health(): FeatureStoreHealth;
}

const DTYPE_NAMES: Record<Tensor['dtype'], string> = { f32: 'float32', f16: 'float16', i32: 'int32', u32: 'uint32' };

/** Process-wide: a re-put of the same id in any store always gets a strictly larger generation. */
let lastGeneration = 0;

interface Resident {
  generation: number;
  tensors: Record<string, Tensor>;
  bytes: number;
  putAtMs: number;
  leases: Set<string>;
}

export function memUri(storeId: string, sampleId: string, generation: number): string {
  return `mem://${encodeURIComponent(storeId)}/${encodeURIComponent(sampleId)}?generation=${generation}`;
}

export function parseMemUri(uri: string): { storeId: string; sampleId: string; generation: number } {
  const match = /^mem:\/\/([^/]+)\/([^?]+)\?generation=(\d+)$/.exec(uri);
  if (!match) throw new FeatureNotFoundError(`not a mem:// feature URI: ${uri}`);
  return { storeId: decodeURIComponent(match[1]), sampleId: decodeURIComponent(match[2]), generation: Number(match[3]) };
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

  constructor(
    private readonly gpu: Gpu,
    private readonly options: {
      storeId?: string;
      maxResidentBytes?: number;
      maxHoldAgeMs?: number;
      cloneOnGet?: boolean;
      clock?: () => number;
      /** Where `file://` refs (offline shards) are read from. */
      files?: FileStore;
    } = {},
  ) {
    this.storeId = options.storeId ?? 'local';
    this.clock = options.clock ?? (() => performance.now());
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

  put(tensors: Readonly<Record<string, Tensor>>, sampleId: string, metadata: PutMetadata = {}): SampleRef {
    const names = Object.keys(tensors);
    if (names.length === 0) throw new TypeError(`put ${sampleId}: no tensors given`);
    let bytes = 0;
    for (const name of names) bytes += tensors[name].byteLength;
    const replaced = this.resident.get(sampleId);
    const limit = this.options.maxResidentBytes;
    if (limit !== undefined) {
      const after = this.residentBytes() - (replaced && replaced.leases.size === 0 ? replaced.bytes : 0) + bytes;
      if (after > limit) {
        throw new FeatureStoreBudgetError(
          `put ${sampleId}: ${bytes} bytes would bring the store "${this.storeId}" to ${after} bytes, over its budget of ${limit} (the consumer is behind; nothing was stored)`,
        );
      }
    }
    const targetName = metadata.targetFeatureName ?? 'target';
    const specs: Record<string, FeatureSpec> = {};
    for (const name of names) {
      const t = tensors[name];
      const isTarget = name === targetName && metadata.targetRepr !== undefined;
      specs[name] = makeFeatureSpec({
        name,
        shape: [...t.shape],
        dtype: DTYPE_NAMES[t.dtype],
        targetRepr: isTarget ? metadata.targetRepr : null,
        targetMeta: isTarget && metadata.vocabMapVersion ? { vocab_map_version: metadata.vocabMapVersion } : {},
      });
    }
    const generation = ++lastGeneration;
    if (replaced) {
      // A re-put may hand back some of the same tensors; those must not be freed with the old generation.
      const kept = new Set(Object.values(tensors));
      const old = Object.fromEntries(Object.entries(replaced.tensors).filter(([, t]) => !kept.has(t)));
      this.retire(sampleId, { ...replaced, tensors: old });
    }
    this.resident.set(sampleId, { generation, tensors: { ...tensors }, bytes, putAtMs: this.clock(), leases: new Set() });
    const refMetadata: JsonRecord = { ...(metadata.extra ?? {}) };
    if (metadata.targetRepr) refMetadata.target_repr = metadata.targetRepr;
    if (metadata.vocabMapVersion) refMetadata.vocab_map_version = metadata.vocabMapVersion;
    return makeSampleRef({
      sampleId,
      runId: metadata.runId ?? 'unknown',
      sourceTaskId: metadata.sourceTaskId ?? null,
      featureStoreUri: memUri(this.storeId, sampleId, generation),
      featureKeys: Object.fromEntries(names.map((n) => [n, `${sampleId}/${n}`])),
      featureSpecs: specs,
      strategy: metadata.strategy ?? 'eagle3',
      targetModelVersion: metadata.targetModelVersion ?? 'unknown',
      tokenizerVersion: metadata.tokenizerVersion ?? 'unknown',
      draftWeightVersion: metadata.draftWeightVersion ?? null,
      numTokens: metadata.numTokens ?? 0,
      estimatedBytes: bytes,
      metadata: refMetadata,
    });
  }

  async get(ref: SampleRef, names?: readonly string[]): Promise<{ tensors: Record<string, Tensor>; handle: FeatureHandle }> {
    if (ref.featureStoreUri.startsWith('file://')) return this.getFile(ref, names);
    const { storeId, sampleId, generation } = parseMemUri(ref.featureStoreUri);
    if (storeId !== this.storeId) throw new FeatureNotFoundError(`sample ${ref.sampleId} lives in store "${storeId}", not "${this.storeId}"`);
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

  abort(sampleId: string): void {
    const entry = this.resident.get(sampleId);
    if (!entry) return;
    this.resident.delete(sampleId);
    this.retire(sampleId, entry);
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
    };
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
