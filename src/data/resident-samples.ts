/**
 * The GPU residency of a LocalFeatureStore's samples (docs/features.md §2): which generation of each
 * id is resident and who leases it, the retired generations (aborted or superseded) that still have
 * readers, and the bytes both hold. The rules here are the ones a buffer pool makes delicate: the
 * release of the last lease on the current generation frees the sample (consume-once), and a retired
 * generation's buffers go back to the pool only on its last release, since a pooled buffer would be
 * reused under a reader's feet.
 *
 * Its own file because these rules hold whatever the store does around them (its spill, its budget,
 * its offline shards): local-feature-store.ts decides when a sample is put, re-materialised, adopted
 * or aborted, and this file keeps the books of what that leaves on the GPU.
 */
import type { FeatureHandle } from '../contracts/index.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';

/** One generation of one sample on the GPU. */
export interface Resident {
  generation: number;
  tensors: Record<string, Tensor>;
  bytes: number;
  putAtMs: number;
  leases: Set<string>;
}

export class ResidentSamples {
  private readonly resident = new Map<string, Resident>();
  /** Aborted or superseded generations still leased: freed on their last release. */
  private readonly draining = new Map<string, Resident>();
  private forceFreedTotal = 0;

  constructor(private readonly gpu: Gpu) {}

  /** The resident (current) generation of `sampleId`, if any. */
  get(sampleId: string): Resident | undefined {
    return this.resident.get(sampleId);
  }

  has(sampleId: string): boolean {
    return this.resident.has(sampleId);
  }

  /** Makes `entry` the resident generation of `sampleId` (the caller retired the one it replaces). */
  set(sampleId: string, entry: Resident): void {
    this.resident.set(sampleId, entry);
  }

  /** Evicts the resident generation of `sampleId` at once for new readers; its buffers go once unleased. */
  evict(sampleId: string): void {
    const entry = this.resident.get(sampleId);
    if (entry) {
      this.resident.delete(sampleId);
      this.retire(sampleId, entry);
    }
  }

  /** Free now if unleased, else park until the last lease is released. */
  retire(sampleId: string, entry: Resident): void {
    if (entry.leases.size === 0) this.free(entry);
    else this.draining.set(`${sampleId}#${entry.generation}`, entry);
  }

  /** Ends one lease (idempotent); the last lease of a generation lets it go. */
  release(handle: FeatureHandle): void {
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

  /** Force-frees unleased samples put more than `maxAgeMs` before `nowMs`; returns how many. */
  sweep(nowMs: number, maxAgeMs: number): number {
    let forceFreed = 0;
    for (const [id, entry] of [...this.resident]) {
      if (entry.leases.size === 0 && nowMs - entry.putAtMs > maxAgeMs) {
        this.resident.delete(id);
        this.free(entry);
        forceFreed++;
      }
    }
    this.forceFreedTotal += forceFreed;
    return forceFreed;
  }

  /** Bytes of every resident and retired-but-leased generation. */
  bytes(): number {
    let n = 0;
    for (const r of this.resident.values()) n += r.bytes;
    for (const r of this.draining.values()) n += r.bytes;
    return n;
  }

  /** The residency part of the store's health record, at `nowMs`. */
  stats(nowMs: number): { residentSamples: number; leases: number; oldestAgeMs: number; pendingFrees: number; forceFreedTotal: number } {
    let leases = 0;
    let oldest = 0;
    for (const r of this.resident.values()) {
      leases += r.leases.size;
      oldest = Math.max(oldest, nowMs - r.putAtMs);
    }
    for (const r of this.draining.values()) leases += r.leases.size;
    return {
      residentSamples: this.resident.size,
      leases,
      oldestAgeMs: oldest,
      pendingFrees: this.draining.size,
      forceFreedTotal: this.forceFreedTotal,
    };
  }

  private free(entry: Resident): void {
    this.gpu.release(...Object.values(entry.tensors));
  }
}
