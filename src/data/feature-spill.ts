/**
 * The crash-spill codec of LocalFeatureStore (docs/durability.md §6): how a sample's GPU tensors become
 * one file on a FileStore and come back, and nothing about residency or leases.
 *
 * A crash loses GPU memory, so a committed but not yet durably acked sample must be recoverable
 * from disk. With a spill, `put` reads the tensors back (gpu.read), writes them as one safetensors
 * file `<quoted sample id>.safetensors` with writeAtomic (temp + fsync + rename) and only then
 * registers the sample and returns its ref, so a commit can never name a sample that is not on
 * disk. Cost per put: one GPU→CPU readback (it flushes the command batch and waits for the queue),
 * one CPU copy into the file image, and one write + fsync: milliseconds per sample on a real disk,
 * so the spill is a durability tap for online runs, not a hot path (bench/runtime.ts measures it).
 *
 * The file records the generation of the ref it backs. The codec takes that generation from the
 * store's GenerationClock, first telling the clock about any generation already on disk: after a
 * restart the clock starts again at 1, and a re-put must still outrank the file it replaces.
 * Every failure names the file, and a damaged file is left in place for inspection.
 */
import type { Gpu } from '../gpu/gpu.ts';
import { BYTES_PER_ELEMENT, type DType, type Tensor } from '../gpu/tensor.ts';
import type { FileStore } from '../ports/storage.ts';
import { SafetensorsFile, SafetensorsReader, type SafetensorsDType } from '../formats/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../formats/safetensors-writer.ts';
import { crc32 } from '../util/crc32.ts';
import { FeatureNotFoundError, FeatureSpillError, type FeatureStoreHealth, type GenerationClock } from './feature-store.ts';

/** Safetensors dtype each GPU dtype is spilled as. u32 has no safetensors name: its bits go as I32 and the file records the GPU dtype. */
const SPILL_DTYPES: Record<DType, SafetensorsDType> = { f32: 'F32', f16: 'F16', i32: 'I32', u32: 'I32' };
// Version 2 adds a CRC-32 per tensor: a bit flip in the tensor bytes passes every structural check.
const SPILL_FORMAT = 'speclab-feature-spill/2';
const SPILL_SUFFIX = '.safetensors';

/** A validated spill file: raw little-endian bytes per tensor, as they were on the GPU. */
export interface SpilledSample {
  generation: number;
  tensors: Record<string, { dtype: DType; shape: number[]; raw: Uint8Array }>;
  bytes: number;
}

export type SpillStats = NonNullable<FeatureStoreHealth['spill']>;

/** File name of a sample's spill: the quoted id, so any id is one safe path segment. */
export function spillPath(sampleId: string): string {
  return `${encodeURIComponent(sampleId)}${SPILL_SUFFIX}`;
}

/** One store's spill folder: writes, reads, deletes and lists its sample files and counts what it did. */
export class FeatureSpill {
  private readonly counters: SpillStats = { writes: 0, bytesWritten: 0, reads: 0, deletes: 0, failedDeletes: 0, lastError: null };

  constructor(
    readonly files: FileStore,
    private readonly gpu: Gpu,
    private readonly storeId: string,
    private readonly generations: GenerationClock,
  ) {}

  stats(): SpillStats {
    return { ...this.counters };
  }

  exists(sampleId: string): Promise<boolean> {
    return this.files.exists(spillPath(sampleId));
  }

  /** Reads the tensors back and writes the spill file; resolves to the generation the file records. */
  async write(tensors: Readonly<Record<string, Tensor>>, sampleId: string): Promise<number> {
    // After a restart the counter starts again at 1: a re-put must still outrank the file it replaces.
    const previous = await spilledGeneration(this.files, spillPath(sampleId));
    if (previous !== null) this.generations.observe(previous);
    const generation = this.generations.next();
    const names = Object.keys(tensors);
    const reads = names.map((name) => this.gpu.readLater(tensors[name]));
    this.gpu.batcher.flush();
    const host = await Promise.all(reads);
    this.gpu.staging.trim(); // one sample's staging, of no use to the next sample's lengths
    const contents: SpilledSample['tensors'] = {};
    names.forEach((name, i) => {
      const t = tensors[name];
      contents[name] = { dtype: t.dtype, shape: [...t.shape], raw: new Uint8Array(host[i].buffer, host[i].byteOffset, t.byteLength) };
    });
    await this.writeImage(sampleId, encodeSpill(this.storeId, sampleId, generation, contents), `put ${sampleId}`);
    return generation;
  }

  /** Rewrites an already spilled sample under another generation (adopt renews it). */
  rewrite(sampleId: string, generation: number, spilled: SpilledSample, what: string): Promise<void> {
    return this.writeImage(sampleId, encodeSpill(this.storeId, sampleId, generation, spilled.tensors), what);
  }

  private async writeImage(sampleId: string, image: Uint8Array, what: string): Promise<void> {
    const spill = this.files;
    const path = spillPath(sampleId);
    try {
      await spill.writeAtomic(path, image);
    } catch (err) {
      this.counters.lastError = `write ${spill.root}/${path}: ${(err as Error).message}`;
      throw new FeatureSpillError(
        `${what}: writing the spill file ${spill.root}/${path} failed, nothing was stored: ${(err as Error).message}`,
        { cause: err },
      );
    }
    this.counters.writes++;
    this.counters.bytesWritten += image.byteLength;
  }

  /** Reads and validates a spill file; a damaged one is left in place and reported with its path. */
  async read(sampleId: string, what: string): Promise<SpilledSample> {
    const spill = this.files;
    const path = spillPath(sampleId);
    const source = `${spill.root}/${path}`;
    let bytes: Uint8Array;
    try {
      bytes = await spill.read(path);
    } catch (err) {
      if (!(await spill.exists(path))) {
        throw new FeatureNotFoundError(
          `${what}: sample ${sampleId} is not resident in store "${this.storeId}" and has no spill file ${source} (released after its durable ack, aborted, or never put)`,
        );
      }
      throw new FeatureSpillError(`${what}: cannot read the spill file ${source}: ${(err as Error).message}`, { cause: err });
    }
    const spilled = decodeSpill(bytes, sampleId, source, what);
    this.counters.reads++;
    return spilled;
  }

  /** Uploads a spilled sample's tensors; on a failure none of them stays allocated. */
  upload(spilled: SpilledSample): Record<string, Tensor> {
    const tensors: Record<string, Tensor> = {};
    try {
      for (const [name, t] of Object.entries(spilled.tensors))
        tensors[name] = this.gpu.upload(t.shape, t.dtype, hostView(t.dtype, t.raw), name);
    } catch (err) {
      this.gpu.release(...Object.values(tensors));
      throw err;
    }
    return tensors;
  }

  /** Never rejects: a file that cannot be deleted is counted and left for the next reconcile. */
  async delete(sampleId: string, inflightWrite?: Promise<unknown>): Promise<void> {
    const spill = this.files;
    // A put still writing this id would otherwise land its file after the delete.
    await inflightWrite?.catch(() => {});
    try {
      await spill.remove(spillPath(sampleId));
      this.counters.deletes++;
    } catch (err) {
      this.counters.failedDeletes++;
      this.counters.lastError = `delete ${spill.root}/${spillPath(sampleId)}: ${(err as Error).message}`;
    }
  }

  /** Sample ids that have a spill file (any generation). */
  async sampleIds(): Promise<string[]> {
    const ids: string[] = [];
    for (const name of await this.files.list('')) {
      const id = sampleIdOfSpill(name);
      if (id !== undefined) ids.push(id);
    }
    return ids;
  }

  /** Deletes leftovers of interrupted atomic writes and the files of samples neither committed nor `live`. */
  async dropUncommitted(committed: ReadonlySet<string>, live: (sampleId: string) => boolean): Promise<string[]> {
    const spill = this.files;
    const dropped: string[] = [];
    for (const name of await spill.list('')) {
      if (name.includes(`${SPILL_SUFFIX}.tmp-`)) {
        await spill.remove(name);
        continue;
      }
      const id = sampleIdOfSpill(name);
      if (id === undefined || committed.has(id) || live(id)) continue;
      await spill.remove(name);
      dropped.push(id);
    }
    return dropped;
  }
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
  const crcs: Record<string, number> = {};
  for (const [name, t] of Object.entries(tensors)) {
    entries[name] = { dtype: SPILL_DTYPES[t.dtype], shape: t.shape, data: t.raw };
    dtypes[name] = t.dtype;
    crcs[name] = crc32(t.raw);
  }
  return writeSafetensors(entries, {
    format: SPILL_FORMAT,
    sample_id: sampleId,
    store_id: storeId,
    generation: String(generation),
    dtypes: JSON.stringify(dtypes),
    crc32: JSON.stringify(crcs),
  });
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
  let crcs: Record<string, unknown> = {};
  try {
    dtypes = JSON.parse(meta.dtypes ?? '') as Record<string, unknown>;
    crcs = JSON.parse(meta.crc32 ?? '') as Record<string, unknown>;
  } catch {
    damaged('its dtype or CRC-32 table is not JSON');
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
    if (raw.byteLength !== numel * BYTES_PER_ELEMENT[dtype as DType])
      damaged(`tensor "${name}" has ${raw.byteLength} bytes for shape [${entry.shape}]`);
    if (crc32(raw) !== crcs[name])
      damaged(
        `tensor "${name}" has CRC-32 ${crc32(raw).toString(16)}, the file recorded ${typeof crcs[name] === 'number' ? crcs[name].toString(16) : 'none'}`,
      );
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
