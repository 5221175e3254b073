/**
 * GPU timing with timestamp queries where the device has `timestamp-query`; wall-clock around
 * `onSubmittedWorkDone` otherwise. Timestamps are written at compute-pass boundaries, so a timed
 * region is its own pass (the batcher ends the open pass before and after).
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

  constructor(private readonly ctx: GpuContext, private readonly batcher: CommandBatcher) {
    if (ctx.hasFeature('timestamp-query')) {
      this.querySet = ctx.device.createQuerySet({ type: 'timestamp', count: 2 });
      this.resolveBuffer = ctx.device.createBuffer({ size: 16, usage: 0x200 /* QUERY_RESOLVE */ | 0x04 /* COPY_SRC */ });
      this.readBuffer = ctx.device.createBuffer({ size: 16, usage: 0x01 /* MAP_READ */ | 0x08 /* COPY_DST */ });
    }
  }

  get usesTimestamps(): boolean {
    return this.querySet !== undefined;
  }

  /**
   * Time the GPU work that `encode` records. Everything encoded inside goes into one compute pass
   * whose begin/end timestamps are written, then the batch is submitted and awaited.
   */
  async time(encode: () => void | Promise<void>): Promise<TimedResult> {
    await this.batcher.finish();
    if (!this.querySet || !this.resolveBuffer || !this.readBuffer) {
      const start = performance.now();
      await encode();
      await this.batcher.finish();
      return { seconds: (performance.now() - start) / 1000, source: 'wall-clock' };
    }
    this.batcher.endPass();
    this.batcher.nextPassTimestamps = { querySet: this.querySet, beginningOfPassWriteIndex: 0 };
    await encode();
    // The region must be one pass: write the end timestamp with an empty pass if needed.
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
