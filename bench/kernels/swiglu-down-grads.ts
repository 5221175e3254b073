/**
 * The backward of a packed SwiGLU MLP's down projection (src/kernels/swiglu-down-grads.ts):
 * the fused kernel (one dispatch where the device takes it, at any size) against the pair of products into a dAct
 * tensor and swiglu/backward-packed, interleaved round by round. Each timed encode runs the call
 * CALLS times, so the figure is the per-call cost inside a step's batch (dispatch overhead included).
 * GFLOP/s counts the two products (4·R·I·H).
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { linearGrads } from '../../src/kernels/linear-grads.ts';
import { swigluBackwardPacked } from '../../src/kernels/swiglu.ts';
import { swigluDownGrads, swigluDownGradsUnfit } from '../../src/kernels/swiglu-down-grads.ts';
import { Rng } from '../../src/util/random.ts';
import type { BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';

/** [rows, inter, hidden]: the fixture draft's MLP (80 tokens), the lab draft's (224 tokens), the mid config's (128 tokens). */
export const SWIGLU_DOWN_BENCH_SHAPES: readonly [number, number, number][] = [
  [80, 176, 64],
  [224, 512, 128],
  [128, 2816, 1024],
];

const CALLS = 16;

export async function benchSwigluDownGrads(
  gpu: Gpu,
  shapes: readonly [number, number, number][] = SWIGLU_DOWN_BENCH_SHAPES,
): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(94);
  for (const [R, I, H] of shapes) {
    const shape = { rows: R, inter: I, hidden: H };
    const gu = gpu.upload([R, 2 * I], 'f32', rng.floats(R * 2 * I, 2), 'gu');
    const act = gpu.upload([R, I], 'f32', rng.floats(R * I, 1), 'act');
    const w = gpu.upload([H, I], 'f32', rng.floats(H * I, 0.05), 'W');
    const dy = gpu.upload([R, H], 'f32', rng.floats(R * H, 1), 'dY');
    const dAct = gpu.tensor([R, I], 'f32', 'dAct');
    const dgu = gpu.tensor([R, 2 * I], 'f32', 'dgu');
    const dw = gpu.zeros([H, I], 'f32', 'dW');
    const t = { dy, w, act, gu, dgu, dw };
    const repeat = (run: () => Promise<void>) => async () => {
      for (let i = 0; i < CALLS; i++) await run();
    };
    // The fused kernel at every size (its default stops at SWIGLU_DOWN_FUSED_MAX_FLOPS, which these figures set).
    const unfit = swigluDownGradsUnfit(gpu, shape, t, Infinity);
    const medians = await interleavedMedians(
      gpu,
      new Map([
        [
          unfit ? `swigluDownGrads (two commands: ${unfit})` : 'swigluDownGrads (one dispatch)',
          repeat(() => swigluDownGrads(gpu, t, shape, Infinity)),
        ],
        [
          'linearGrads + swigluBackwardPacked',
          repeat(async () => {
            await linearGrads(gpu, { dy, w, x: act, dx: dAct, dw }, { rows: R, inFeatures: I, outFeatures: H });
            await swigluBackwardPacked(gpu, gu, dAct, dgu, { rows: R, inter: I });
          }),
        ],
      ]),
    );
    for (const [variant, seconds] of medians) {
      const perCall = seconds / CALLS;
      out.push({
        family: 'swiglu-down-grads',
        variant,
        shape: `${R}x${I}x${H}`,
        ms: perCall * 1e3,
        gflops: (4 * R * I * H) / perCall / 1e9,
      });
    }
    gpu.release(gu, act, w, dy, dAct, dgu, dw);
  }
  return out;
}
