/**
 * Readback through a ring of reusable MAP_READ staging buffers.
 *
 * `enqueue` records a copy into the current batch and returns a promise; the map happens after the
 * batch is submitted (at the latest at the next idle turn of the event loop), so the caller's hot
 * path never waits on mapAsync (losses are read with one step of lag). Staging buffers go back to
 * the ring after unmapping.
 */
import type { CommandBatcher } from './command-batcher.ts';
import { MemoryCounter, sizeClass } from './buffer-pool.ts';

export class StagingRing {
  private readonly free = new Map<number, GPUBuffer[]>();
  private inFlight = 0;
  private readonly pending = new Set<Promise<unknown>>();
  /** Buffers ever created (a steady-state loop should stop growing this). */
  created = 0;

  constructor(
    private readonly device: GPUDevice,
    private readonly batcher: CommandBatcher,
    private readonly counter = new MemoryCounter(),
  ) {}

  get pendingReads(): number {
    return this.inFlight;
  }

  private acquire(bytes: number): GPUBuffer {
    const size = sizeClass(bytes);
    const reused = this.free.get(size)?.pop();
    if (reused) return reused;
    this.created++;
    this.counter.created(size);
    return this.device.createBuffer({ label: 'staging', size, usage: 0x01 /* MAP_READ */ | 0x08 /* COPY_DST */ });
  }

  /** Destroy the free staging buffers (in-flight ones come back later). Returns the bytes freed. */
  trim(): number {
    let freed = 0;
    for (const list of this.free.values()) {
      for (const b of list) {
        freed += b.size;
        this.counter.destroyed(b.size);
        b.destroy();
      }
    }
    this.free.clear();
    return freed;
  }

  private give(buffer: GPUBuffer): void {
    let list = this.free.get(buffer.size);
    if (!list) this.free.set(buffer.size, (list = []));
    list.push(buffer);
  }

  /** Copy `size` bytes from `src` at `offset` (a multiple of 4) and resolve with them once mapped. */
  enqueue(src: GPUBuffer, offset: number, size: number): Promise<ArrayBuffer> {
    const padded = Math.ceil(size / 4) * 4;
    const staging = this.acquire(padded);
    this.batcher.copyBuffer(src, offset, staging, 0, padded);
    this.inFlight++;
    this.batcher.flushSoon();
    const read = new Promise<ArrayBuffer>((resolve, reject) => {
      this.batcher.onSubmit(() => {
        const submit = this.batcher.stats.submits;
        staging
          .mapAsync(0x0001 /* GPUMapMode.READ */, 0, padded)
          .then(async () => {
            // Mapped means the device has run every submit up to this one.
            this.batcher.noteFinished(submit);
            const out = staging.getMappedRange(0, padded).slice(0, size);
            staging.unmap();
            this.give(staging);
            await this.batcher.settled();
            resolve(out);
          })
          .catch(reject)
          .finally(() => this.inFlight--);
      });
    });
    const settled = read.then(
      () => undefined,
      () => undefined,
    );
    this.pending.add(settled);
    void settled.then(() => this.pending.delete(settled));
    return read;
  }

  /** Resolves when every read enqueued so far has finished (successfully or not). */
  async drain(): Promise<void> {
    await Promise.all([...this.pending]);
  }

  destroy(): void {
    this.trim();
  }
}
