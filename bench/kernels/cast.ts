/** f32 ↔ f16 cast benchmark: GB/s (bytes read + written) of the feature casts at EAGLE3 feature shapes. */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { castF16ToF32, castF32ToF16 } from '../../src/kernels/cast.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/** [rows, width]: aux hidden states of a 2048-token sample of an 8B target (3 · 4096), and its 32000-vocab logits of 512 tokens. */
export const CAST_BENCH_SHAPES: readonly [number, number][] = [
  [2048, 12288],
  [512, 32000],
];

export async function benchCast(gpu: Gpu, shapes: readonly [number, number][] = CAST_BENCH_SHAPES): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(73);
  for (const [rows, width] of shapes) {
    const n = rows * width;
    const wide = gpu.upload([rows, width], 'f32', rng.floats(n, 4), 'wide');
    const half = gpu.tensor([rows, width], 'f16', 'half');
    const back = gpu.tensor([rows, width], 'f32', 'back');
    const overflow = gpu.zeros([1], 'u32', 'overflow');
    const shape = `${rows}x${width}`;
    const narrow = await medianSeconds(gpu, () => castF32ToF16(gpu, wide, half, overflow));
    out.push({ family: 'cast', variant: 'f32-f16', shape, ms: narrow * 1e3, gbps: (n * 6) / narrow / 1e9 });
    const widen = await medianSeconds(gpu, () => castF16ToF32(gpu, half, back));
    out.push({ family: 'cast', variant: 'f16-f32', shape, ms: widen * 1e3, gbps: (n * 6) / widen / 1e9 });
    gpu.release(wide, half, back, overflow);
  }
  return out;
}
