/**
 * GPU timing with timestamp queries where the device has `timestamp-query`; wall-clock around
 * `onSubmittedWorkDone` otherwise. Timestamps are written only at compute-pass boundaries, so the
 * timer brackets a region with two empty passes.
 */
import type { CommandBatcher } from './command-batcher.ts';
import type { GpuContext } from './context.ts';

export interface TimedResult {
  /** Seconds of GPU time for the region (or wall time when timestamps are unavailable). */
  seconds: number;
  source: 'timestamp-query' | 'wall-clock';
}

export class GpuTimer {
  private readonly querySet: GPUQuerySet | undefined;
  private readonly resolveBuffer: GPUBuffer | undefined;
  private readonly readBuffer: GPUBuffer | undefined;

  constructor(
    private readonly ctx: GpuContext,
    private readonly batcher: CommandBatcher,
  ) {
    if (ctx.hasFeature('timestamp-query')) {
      this.querySet = ctx.device.createQuerySet({ type: 'timestamp', count: 2 });
      this.resolveBuffer = ctx.device.createBuffer({ size: 16, usage: 0x200 /* QUERY_RESOLVE */ | 0x04 /* COPY_SRC */ });
      this.readBuffer = ctx.device.createBuffer({ size: 16, usage: 0x01 /* MAP_READ */ | 0x08 /* COPY_DST */ });
    }
  }

  /** Bytes of the query resolve and readback buffers (zero without timestamp queries). */
  get bufferBytes(): number {
    return (this.resolveBuffer?.size ?? 0) + (this.readBuffer?.size ?? 0);
  }

  get usesTimestamps(): boolean {
    return this.querySet !== undefined;
  }

  /**
   * Time the GPU work that `encode` records: a timestamp is written by an empty pass before it and
   * another after it; then the batch is submitted and awaited. If `encode` fills more than one
   * batch (maxDispatchesPerSubmit), the region spans the submits (both timestamps are on the same
   * queue timeline).
   */
  async time(encode: () => void | Promise<void>): Promise<TimedResult> {
    await this.batcher.finish();
    // The region goes in batches of maxDispatchesPerSubmit, as it did before the idle rule: one
    // batch where it fits, so no host time falls between its timestamps.
    this.batcher.fillBatches();
    if (!this.querySet || !this.resolveBuffer || !this.readBuffer) {
      const start = performance.now();
      await encode();
      await this.batcher.finish();
      return { seconds: (performance.now() - start) / 1000, source: 'wall-clock' };
    }
    // Empty passes carry the timestamps, so the region may hold dispatches, copies or both.
    const beginPass = this.batcher
      .rawEncoder()
      .beginComputePass({ timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: 0 } });
    beginPass.end();
    await encode();
    const encoder = this.batcher.rawEncoder();
    const endPass = encoder.beginComputePass({ timestampWrites: { querySet: this.querySet, endOfPassWriteIndex: 1 } });
    endPass.end();
    encoder.resolveQuerySet(this.querySet, 0, 2, this.resolveBuffer, 0);
    encoder.copyBufferToBuffer(this.resolveBuffer, 0, this.readBuffer, 0, 16);
    await this.batcher.finish();
    await this.readBuffer.mapAsync(0x0001);
    const [begin, end] = new BigUint64Array(this.readBuffer.getMappedRange().slice(0));
    this.readBuffer.unmap();
    return { seconds: Number(end - begin) / 1e9, source: 'timestamp-query' };
  }

  destroy(): void {
    this.querySet?.destroy();
    this.resolveBuffer?.destroy();
    this.readBuffer?.destroy();
  }
}
