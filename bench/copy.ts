/**
 * Device copy bandwidth (copyBufferToBuffer), the ceiling memory-bound work is compared against.
 * Shared by the kernel benchmarks (overhead.ts) and the end-to-end target benchmark (target.ts),
 * so a decode step's bandwidth fraction is taken against a copy measured in the same run.
 */
import type { Gpu } from '../src/gpu/gpu.ts';
import { medianSeconds, type BenchRecord } from './record.ts';

/** One record per size: median time of a `mib` MiB buffer-to-buffer copy, counting read + write. */
export async function benchCopy(gpu: Gpu, sizesMiB: readonly number[] = [1, 16, 64]): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  for (const mib of sizesMiB) {
    const bytes = mib << 20;
    const src = gpu.tensor([bytes / 4], 'f32');
    const dst = gpu.tensor([bytes / 4], 'f32');
    try {
      const seconds = await medianSeconds(gpu, () => gpu.batcher.copyBuffer(src.part.buffer, 0, dst.part.buffer, 0, bytes));
      // A copy reads and writes every byte once.
      out.push({
        family: 'copy',
        variant: 'copyBufferToBuffer',
        shape: `${mib} MiB`,
        ms: seconds * 1e3,
        gbps: (2 * bytes) / seconds / 1e9,
      });
    } finally {
      gpu.release(src, dst);
    }
  }
  return out;
}
