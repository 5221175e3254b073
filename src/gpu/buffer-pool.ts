/**
 * GPUBuffer pool by size class, with explicit release.
 *
 * Size classes are 1, 1.25, 1.5 and 1.75 times each power of two (at least 256 bytes), so a reused
 * buffer wastes at most 25% and odd shapes do not fragment the pool into exact-size lists.
 * Buffers are returned with `release` (never by garbage collection: GC-driven release is slow and
 * invisible to the GC's heuristics) and destroyed by `trim` or `destroy`.
 *
 * A request takes the buffer its label had last time when that one is free, else the last released.
 * A training step asks for the same labelled tensors in the same order every time, so each tensor
 * gets the buffer it had the step before, and the pipeline cache's bind groups (keyed by buffer) are
 * reused instead of created anew: with plain last-in-first-out reuse the buffers rotate from step
 * to step, and about two of every three dispatches of a draft step created a bind group.
 */

export const STORAGE_USAGE = 0x80 /* STORAGE */ | 0x04 /* COPY_SRC */ | 0x08; /* COPY_DST */

export function sizeClass(bytes: number): number {
  const n = Math.max(256, Math.ceil(bytes));
  const pow = 2 ** Math.floor(Math.log2(n));
  for (const step of [1, 1.25, 1.5, 1.75, 2]) {
    const candidate = Math.ceil((pow * step) / 4) * 4;
    if (candidate >= n) return candidate;
  }
  return pow * 2;
}

/** Bytes of GPU buffers that exist now, and the most that existed at once. */
export interface MemoryStats {
  liveBytes: number;
  peakBytes: number;
}

/**
 * Counts the bytes of every GPUBuffer a Gpu creates (pooled tensors, pooled-but-free buffers,
 * staging, the uniform arena, timer buffers): what the device holds, not what tensors are leased,
 * because the memory plan is checked against what the device must really hold at the peak.
 */
export class MemoryCounter {
  private live = 0;
  private peak = 0;

  created(bytes: number): void {
    this.live += bytes;
    if (this.live > this.peak) this.peak = this.live;
  }

  destroyed(bytes: number): void {
    this.live -= bytes;
  }

  /** Start a new peak window at the bytes live now (e.g. right before the step being measured). */
  resetPeak(): void {
    this.peak = this.live;
  }

  stats(): MemoryStats {
    return { liveBytes: this.live, peakBytes: this.peak };
  }
}

export interface PoolStats {
  liveBuffers: number;
  liveBytes: number;
  freeBuffers: number;
  freeBytes: number;
  hits: number;
  misses: number;
}

export class BufferPool {
  private readonly free = new Map<string, GPUBuffer[]>();
  private readonly owned = new Map<GPUBuffer, string>();
  /** The buffer each (size class, usage, label) got last, and the reverse, to forget a destroyed buffer. */
  private readonly lastOf = new Map<string, GPUBuffer>();
  private readonly servedAs = new Map<GPUBuffer, Set<string>>();
  private readonly leased = new Set<GPUBuffer>();
  private hits = 0;
  private misses = 0;

  constructor(
    private readonly device: GPUDevice,
    private readonly counter = new MemoryCounter(),
  ) {}

  acquire(bytes: number, usage: number = STORAGE_USAGE, label = 'pooled'): GPUBuffer {
    const size = sizeClass(bytes);
    const key = `${size}:${usage}`;
    const labelKey = `${key}|${label}`;
    const list = this.free.get(key);
    const last = this.lastOf.get(labelKey);
    const at = last && list ? list.lastIndexOf(last) : -1;
    const reused = at >= 0 ? list!.splice(at, 1)[0] : list?.pop();
    const buffer = reused ?? this.create(size, usage, key, label);
    if (reused) this.hits++;
    this.leased.add(buffer);
    if (last !== buffer) {
      if (last) this.servedAs.get(last)?.delete(labelKey);
      this.lastOf.set(labelKey, buffer);
      let labels = this.servedAs.get(buffer);
      if (!labels) this.servedAs.set(buffer, (labels = new Set()));
      labels.add(labelKey);
    }
    return buffer;
  }

  private create(size: number, usage: number, key: string, label: string): GPUBuffer {
    this.misses++;
    const buffer = this.device.createBuffer({ size, usage, label });
    this.counter.created(size);
    this.owned.set(buffer, key);
    return buffer;
  }

  /** Forget a buffer about to be destroyed: it is no longer any label's last. */
  private forget(buffer: GPUBuffer): void {
    this.owned.delete(buffer);
    for (const labelKey of this.servedAs.get(buffer) ?? []) this.lastOf.delete(labelKey);
    this.servedAs.delete(buffer);
  }

  release(buffer: GPUBuffer): void {
    const key = this.owned.get(buffer);
    if (key === undefined) throw new Error(`BufferPool.release: buffer "${buffer.label}" does not belong to this pool`);
    if (!this.leased.delete(buffer)) throw new Error(`BufferPool.release: buffer "${buffer.label}" was released twice`);
    let list = this.free.get(key);
    if (!list) this.free.set(key, (list = []));
    list.push(buffer);
  }

  /**
   * Destroy a leased buffer now instead of returning it to its free list: for a buffer that held
   * something once (a sample uploaded for one batch), whose size class the work that follows may never
   * ask for, so that pooled it would only sit free until the next trim.
   */
  discard(buffer: GPUBuffer): void {
    if (!this.owned.has(buffer)) throw new Error(`BufferPool.discard: buffer "${buffer.label}" does not belong to this pool`);
    if (!this.leased.delete(buffer)) throw new Error(`BufferPool.discard: buffer "${buffer.label}" was released twice`);
    this.forget(buffer);
    this.counter.destroyed(buffer.size);
    buffer.destroy();
  }

  /** Destroy every free buffer (leased ones stay). Returns the bytes freed. */
  trim(): number {
    let freed = 0;
    for (const list of this.free.values()) {
      for (const buffer of list) {
        freed += buffer.size;
        this.counter.destroyed(buffer.size);
        this.forget(buffer);
        buffer.destroy();
      }
    }
    this.free.clear();
    return freed;
  }

  stats(): PoolStats {
    let liveBytes = 0;
    for (const b of this.leased) liveBytes += b.size;
    let freeBuffers = 0;
    let freeBytes = 0;
    for (const list of this.free.values()) {
      freeBuffers += list.length;
      for (const b of list) freeBytes += b.size;
    }
    return { liveBuffers: this.leased.size, liveBytes, freeBuffers, freeBytes, hits: this.hits, misses: this.misses };
  }

  destroy(): void {
    this.trim();
    for (const b of this.leased) {
      this.counter.destroyed(b.size);
      b.destroy();
    }
    this.leased.clear();
    this.owned.clear();
    this.lastOf.clear();
    this.servedAs.clear();
  }
}
