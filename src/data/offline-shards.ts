/**
 * Offline `file://` feature shards as LocalFeatureStore serves them: a ref that names a safetensors
 * shard under a FileStore root instead of a resident sample.
 *
 * Such a sample is never resident: offline refs are re-iterable every epoch, so the shard is read
 * and uploaded on every get and the uploaded tensors belong to that one lease, freed by its
 * release. F16 tensors are uploaded as f16 (half the bytes; the EAGLE3 strategy widens them on the
 * GPU), every other float as f32 and integers as i32. Kept out of the resident store because none of its budget, generation or spill rules
 * apply here (a shard lease always has generation 0).
 */
import { makeFeatureHandle, type FeatureHandle, type SampleRef } from '../contracts/index.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';
import type { FileStore } from '../ports/storage.ts';
import { SafetensorsFile } from '../formats/safetensors.ts';
import { FeatureNotFoundError } from './feature-store.ts';
import { pathOfFileUri } from './offline-manifest.ts';

/** The little-endian f16 bits of a raw tensor (copied when unaligned). */
function f16Bits(raw: Uint8Array): Uint16Array {
  const aligned = raw.byteOffset % 2 === 0 ? raw : raw.slice();
  return new Uint16Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 2);
}

/** Whether a ref names an offline shard rather than a resident sample. */
export function isShardRef(ref: SampleRef): boolean {
  return ref.featureStoreUri.startsWith('file://');
}

/** The leases on offline shards of one store. */
export class OfflineShards {
  /** Tensors uploaded for `file://` leases, freed by their release. */
  private readonly leased = new Map<string, Record<string, Tensor>>();

  constructor(
    private readonly gpu: Gpu,
    private readonly files: FileStore | undefined,
    private readonly storeId: string,
  ) {}

  get activeLeases(): number {
    return this.leased.size;
  }

  /**
   * Reads the shard and uploads the wanted features. `nextLease` numbers the lease token; it is
   * asked only once the upload succeeded, so the store's lease numbering stays shared and gapless.
   */
  async get(
    ref: SampleRef,
    names: readonly string[] | undefined,
    nextLease: () => number,
  ): Promise<{ tensors: Record<string, Tensor>; handle: FeatureHandle }> {
    const files = this.files;
    if (!files)
      throw new FeatureNotFoundError(
        `sample ${ref.sampleId} is a file ref (${ref.featureStoreUri}) but the store "${this.storeId}" has no file root`,
      );
    const path = pathOfFileUri(files, ref.featureStoreUri);
    let shard: SafetensorsFile;
    try {
      shard = new SafetensorsFile(await files.read(path), `${files.root}/${path}`);
    } catch (err) {
      throw new FeatureNotFoundError(`sample ${ref.sampleId}: cannot read feature file ${files.root}/${path}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    const tensors: Record<string, Tensor> = {};
    try {
      for (const name of names ?? Object.keys(ref.featureKeys)) {
        const key = ref.featureKeys[name] ?? name;
        if (!shard.has(key))
          throw new FeatureNotFoundError(
            `feature file ${files.root}/${path} (sample ${ref.sampleId}) has no tensor "${key}" (has ${shard.names.join(', ')})`,
          );
        const entry = shard.entry(key);
        const isFloat = entry.dtype === 'F32' || entry.dtype === 'BF16' || entry.dtype === 'F64';
        const shape = entry.shape.length === 0 ? [1] : [...entry.shape];
        // F16 stays f16 on the GPU (its raw bits; the trainer widens it before the forward).
        if (entry.dtype === 'F16') tensors[name] = this.gpu.upload(shape, 'f16', f16Bits(shard.raw(key)), name);
        else
          tensors[name] = isFloat
            ? this.gpu.upload(shape, 'f32', shard.f32(key), name)
            : this.gpu.upload(shape, 'i32', shard.i32(key), name);
      }
    } catch (err) {
      this.gpu.release(...Object.values(tensors));
      throw err;
    }
    const leaseToken = `${ref.sampleId}:0:${nextLease()}`;
    this.leased.set(leaseToken, tensors);
    return { tensors, handle: makeFeatureHandle({ sampleId: ref.sampleId, generation: 0, leaseToken }) };
  }

  /** Frees a shard lease's tensors; false when the handle is not a shard lease of this store. */
  release(handle: FeatureHandle): boolean {
    const tensors = this.leased.get(handle.leaseToken);
    if (!tensors) return false;
    this.leased.delete(handle.leaseToken);
    this.gpu.release(...Object.values(tensors));
    return true;
  }
}
