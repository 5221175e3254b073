/**
 * A SwiGLU MLP's gate and up projections with the activation (src/kernels/linear-swiglu.ts): the
 * fused kernel (one dispatch where the device takes it, at any size) against the stacked product
 * into gu and swiglu/forward-packed, interleaved round by round. Each timed encode runs the call
 * CALLS times, so the figure is the per-call cost inside a step's batch (dispatch overhead included).
 * GFLOP/s counts the product (2·R·2I·H).
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { linearForward } from '../../src/kernels/linear.ts';
import { linearSwiglu, linearSwigluUnfit } from '../../src/kernels/linear-swiglu.ts';
import { swigluForwardPacked } from '../../src/kernels/swiglu.ts';
import { Rng } from '../../src/util/random.ts';
import type { BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';

/** [rows, hidden, inter]: the fixture draft's MLP (80 tokens), the lab draft's (224 tokens), the mid config's (128 tokens). */
export const LINEAR_SWIGLU_BENCH_SHAPES: readonly [number, number, number][] = [
  [80, 64, 176],
  [224, 128, 512],
  [128, 1024, 2816],
];

const CALLS = 16;

export async function benchLinearSwiglu(
  gpu: Gpu,
  shapes: readonly [number, number, number][] = LINEAR_SWIGLU_BENCH_SHAPES,
): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(95);
  for (const [R, H, I] of shapes) {
    const shape = { rows: R, hidden: H, inter: I };
    const x = gpu.upload([R, H], 'f32', rng.floats(R * H, 1), 'x');
    const w = gpu.upload([2 * I, H], 'f32', rng.floats(2 * I * H, 0.05), 'W');
    const gu = gpu.tensor([R, 2 * I], 'f32', 'gu');
    const act = gpu.tensor([R, I], 'f32', 'act');
    const t = { x, w, gu, act };
    const repeat = (run: () => Promise<void>) => async () => {
      for (let i = 0; i < CALLS; i++) await run();
    };
    // The fused kernel at every size (its default stops at LINEAR_SWIGLU_MAX_FLOPS, which these figures set).
    const unfit = linearSwigluUnfit(gpu, shape, t, Infinity);
    const medians = await interleavedMedians(
      gpu,
      new Map([
        [
          unfit ? `linearSwiglu (two commands: ${unfit})` : 'linearSwiglu (one dispatch)',
          repeat(() => linearSwiglu(gpu, t, shape, Infinity)),
        ],
        [
          'linearForward + swigluForwardPacked',
          repeat(async () => {
            await linearForward(gpu, x, w, gu, { rows: R, inFeatures: H, outFeatures: 2 * I });
            await swigluForwardPacked(gpu, gu, act, { rows: R, inter: I });
          }),
        ],
      ]),
    );
    for (const [variant, seconds] of medians) {
      const perCall = seconds / CALLS;
      out.push({ family: 'linear-swiglu', variant, shape: `${R}x${H}x${I}`, ms: perCall * 1e3, gflops: (4 * R * I * H) / perCall / 1e9 });
    }
    gpu.release(x, w, gu, act);
  }
  return out;
}
