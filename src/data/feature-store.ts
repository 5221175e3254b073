/**
 * The FeatureStore port and what every store shares: its errors, its health record, the mem://
 * URI that names one generation of a sample, the generation clock behind it, and the one way a
 * SampleRef is built from stored tensors (so refs never differ by store).
 *
 * Kept apart from the stores themselves so the rollout side, the loader and the data-plane store
 * depend on the contract only, not on how LocalFeatureStore keeps its tensors
 * (local-feature-store.ts), spills them (feature-spill.ts) or reads offline shards
 * (offline-shards.ts).
 */
import { makeFeatureSpec, makeSampleRef, type FeatureHandle, type FeatureSpec, type SampleRef } from '../contracts/index.ts';
import type { JsonRecord } from '../contracts/records.ts';
import type { DraftStrategyName, TargetRepr } from '../contracts/enums.ts';
import { Tensor } from '../gpu/tensor.ts';

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

/**
 * The generations one store hands out. A ref's URI carries its sample's generation, so a ref from
 * before a re-put is stale; for that every (re)put must get a strictly larger value than any the
 * store has issued or seen in a spill file. An object rather than a module variable so each store
 * owns its own sequence and the spill codec advances exactly the store it writes for; stores that
 * serve the same ids and must refuse each other's old refs can be given one shared clock.
 */
export class GenerationClock {
  private last = 0;

  /** The next generation: strictly larger than every one issued or observed so far. */
  next(): number {
    return ++this.last;
  }

  /** Records a generation issued elsewhere (a spill file from an earlier process) so the next one outranks it. */
  observe(generation: number): void {
    this.last = Math.max(this.last, generation);
  }
}

export function memUri(storeId: string, sampleId: string, generation: number): string {
  return `mem://${encodeURIComponent(storeId)}/${encodeURIComponent(sampleId)}?generation=${generation}`;
}

export function parseMemUri(uri: string): { storeId: string; sampleId: string; generation: number } {
  const match = /^mem:\/\/([^/]+)\/([^?]+)\?generation=(\d+)$/.exec(uri);
  if (!match) throw new FeatureNotFoundError(`not a mem:// feature URI: ${uri}`);
  return { storeId: decodeURIComponent(match[1]), sampleId: decodeURIComponent(match[2]), generation: Number(match[3]) };
}

const DTYPE_NAMES: Record<Tensor['dtype'], string> = { f32: 'float32', f16: 'float16', i32: 'int32', u32: 'uint32' };

/** Checks that every value of a put is a GPU tensor of a known dtype and returns their total bytes. */
export function featureBytes(tensors: Readonly<Record<string, Tensor>>, sampleId: string): number {
  const names = Object.keys(tensors ?? {});
  if (names.length === 0) throw new TypeError(`put ${sampleId}: no tensors given`);
  let bytes = 0;
  for (const name of names) {
    const t = tensors[name];
    if (!(t instanceof Tensor)) throw new TypeError(`put ${sampleId}: feature "${name}" is not a GPU tensor (got ${describe(t)})`);
    if (!Object.hasOwn(DTYPE_NAMES, t.dtype))
      throw new TypeError(`put ${sampleId}: feature "${name}" has unknown dtype ${JSON.stringify(t.dtype)}`);
    bytes += t.byteLength;
  }
  return bytes;
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
