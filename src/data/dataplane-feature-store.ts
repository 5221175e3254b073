/**
 * The rollout → trainer feature path through the experience data plane: a FeatureStore whose
 * tensors live behind a `DataPlaneClient` (local host/GPU columns, or Redis shared by processes).
 *
 * The control plane is unchanged: the controller still commits, queues, leases and acks metadata
 * refs; only where the tensor bytes travel changes. Per sample this uses the data plane's
 * direct-by-key API (the consumer already knows the ids from its lease): `putSamples` on put,
 * `getSamples` with an explicit field list on get, `clearSamples` on the consume-once release or an
 * abort. Choose it with `featurePath: 'dataplane'` in the run configuration.
 *
 * Ownership matches LocalFeatureStore: `put` takes the caller's GPU tensors (the data plane keeps
 * its own copy, so they are released here). A `get` returns GPU tensors the loader may read until
 * it releases the handle.
 */
import { makeFeatureHandle, type FeatureHandle, type SampleRef } from '../contracts/index.ts';
import type { DataPlaneClient, HostTensor, RowValue } from '../dataplane/types.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { DType, Tensor } from '../gpu/tensor.ts';
import {
  FeatureNotFoundError,
  sampleRefFor,
  specsOf,
  type FeatureStore,
  type FeatureStoreHealth,
  type PutMetadata,
} from './feature-store.ts';

function isGpuTensor(value: RowValue): value is Tensor {
  return 'parts' in value;
}

export function dataplaneUri(partition: string, sampleId: string): string {
  return `dataplane://${encodeURIComponent(partition)}/${encodeURIComponent(sampleId)}`;
}

export class DataPlaneFeatureStore implements FeatureStore {
  private readonly leases = new Map<string, { sampleId: string; uploaded: Tensor[] }>();
  private leaseCounter = 0;
  private resident = new Set<string>();
  /** Clears run in the background (release is synchronous); the first failure surfaces on the next call. */
  private pendingClears: Promise<unknown>[] = [];
  private clearError: unknown;

  constructor(
    private readonly gpu: Gpu,
    private readonly client: DataPlaneClient,
    readonly partition: string,
  ) {}

  /** Declare the partition: every feature the rollout writes, with its dtype, and the trainer as consumer. */
  static async open(
    gpu: Gpu,
    client: DataPlaneClient,
    partition: string,
    fields: Readonly<Record<string, DType>>,
  ): Promise<DataPlaneFeatureStore> {
    await client.registerPartition({ partition, fields, consumerTasks: ['trainer'], replace: true });
    return new DataPlaneFeatureStore(gpu, client, partition);
  }

  private throwIfClearFailed(): void {
    if (this.clearError !== undefined) {
      const err = this.clearError;
      this.clearError = undefined;
      throw new Error(`a background clear of partition ${this.partition} failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async put(tensors: Readonly<Record<string, Tensor>>, sampleId: string, metadata: PutMetadata = {}): Promise<SampleRef> {
    this.throwIfClearFailed();
    const names = Object.keys(tensors);
    if (names.length === 0) throw new TypeError(`put ${sampleId}: no tensors given`);
    const columns: Record<string, RowValue[]> = {};
    let bytes = 0;
    for (const name of names) {
      columns[name] = [tensors[name]];
      bytes += tensors[name].byteLength;
    }
    await this.client.putSamples({ partition: this.partition, sampleIds: [sampleId], columns });
    // The data plane holds its own copy now (GPU column copy or host bytes in Redis).
    this.gpu.release(...Object.values(tensors));
    this.resident.add(sampleId);
    return sampleRefFor({
      sampleId,
      uri: dataplaneUri(this.partition, sampleId),
      featureKeys: Object.fromEntries(names.map((n) => [n, n])),
      specs: specsOf(tensors, metadata),
      bytes,
      metadata,
    });
  }

  async get(ref: SampleRef, names?: readonly string[]): Promise<{ tensors: Record<string, Tensor>; handle: FeatureHandle }> {
    this.throwIfClearFailed();
    if (ref.featureStoreUri !== dataplaneUri(this.partition, ref.sampleId)) {
      throw new FeatureNotFoundError(`sample ${ref.sampleId} (${ref.featureStoreUri}) is not in data-plane partition ${this.partition}`);
    }
    const fields = names ?? Object.keys(ref.featureKeys);
    let columns;
    try {
      columns = await this.client.getSamples({ partition: this.partition, sampleIds: [ref.sampleId], fields });
    } catch (err) {
      throw new FeatureNotFoundError(`sample ${ref.sampleId}: ${(err as Error).message}`, { cause: err });
    }
    const tensors: Record<string, Tensor> = {};
    const uploaded: Tensor[] = [];
    for (const name of fields) {
      const value = columns[name][0];
      if (isGpuTensor(value)) {
        tensors[name] = value; // lent by the GPU column store until the sample is cleared
      } else {
        const host = value as HostTensor;
        const t = this.gpu.upload(host.shape, host.dtype, host.data, name);
        uploaded.push(t);
        tensors[name] = t;
      }
    }
    const leaseToken = `${ref.sampleId}:dp:${++this.leaseCounter}`;
    this.leases.set(leaseToken, { sampleId: ref.sampleId, uploaded });
    return { tensors, handle: makeFeatureHandle({ sampleId: ref.sampleId, generation: 0, leaseToken }) };
  }

  /** Consume-once: the sample is cleared from the data plane after the loader's copy is encoded. */
  release(handle: FeatureHandle): void {
    const lease = this.leases.get(handle.leaseToken);
    if (!lease) return;
    this.leases.delete(handle.leaseToken);
    // Uploaded for this batch only: destroyed, not pooled, once the copies are submitted, so the step
    // that follows does not hold a free sample's buffers (a 32,768-token sample is 1 GiB at f16).
    this.gpu.discard(...lease.uploaded);
    if ([...this.leases.values()].some((l) => l.sampleId === lease.sampleId)) return;
    // Clearing frees lent GPU tensors: do it after the copies encoded so far have been submitted.
    this.gpu.batcher.flush();
    this.clear(lease.sampleId);
  }

  abort(sampleId: string): void {
    this.gpu.batcher.flush();
    this.clear(sampleId);
  }

  private clear(sampleId: string): void {
    this.resident.delete(sampleId);
    const p = this.client.clearSamples(this.partition, [sampleId]).catch((err) => {
      this.clearError ??= err;
    });
    this.pendingClears.push(p);
  }

  /** Wait for background clears (end of a run, tests). */
  async drain(): Promise<void> {
    const pending = this.pendingClears;
    this.pendingClears = [];
    await Promise.all(pending);
    this.throwIfClearFailed();
  }

  gc(): { forceFreed: number } {
    return { forceFreed: 0 };
  }

  health(): FeatureStoreHealth {
    return {
      storeId: `dataplane:${this.partition}`,
      residentSamples: this.resident.size,
      activeLeases: this.leases.size,
      residentBytes: 0,
      maxResidentBytes: null,
      pendingFrees: this.pendingClears.length,
      oldestAgeMs: 0,
      forceFreedTotal: 0,
      spill: null,
    };
  }
}
