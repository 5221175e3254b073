/**
 * Both gradients of a linear layer (src/kernels/linear-grads.ts): linearGrads (one matmul/subgroup-vec4-pair
 * dispatch where the device takes it) against linearWeightGrad then linearInputGrad (two dispatches),
 * interleaved round by round, GFLOP/s of the two products together. Each timed encode runs the call
 * CALLS times, so the figure is the per-call cost inside a step's batch (dispatch overhead included,
 * one submit and wait shared by all of them), which is what the pair saves.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { linearInputGrad, linearWeightGrad, type LinearShape } from '../../src/kernels/linear.ts';
import { linearGrads, linearGradsPairUnfit } from '../../src/kernels/linear-grads.ts';
import { Rng } from '../../src/util/random.ts';
import type { BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';

/**
 * [rows, in, out]: the fixture draft's (80 tokens, H 64) qkv and gate/up, the lab draft's (224 tokens,
 * H 128) o and gate/up, and the mid config's (128 tokens, H 1024) gate/up.
 */
export const LINEAR_GRADS_BENCH_SHAPES: readonly [number, number, number][] = [
  [80, 128, 128],
  [80, 64, 352],
  [224, 128, 128],
  [224, 128, 512],
  [128, 1024, 5632],
];

const CALLS = 16;

export async function benchLinearGrads(
  gpu: Gpu,
  shapes: readonly [number, number, number][] = LINEAR_GRADS_BENCH_SHAPES,
): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(93);
  for (const [rows, inF, outF] of shapes) {
    const shape: LinearShape = { rows, inFeatures: inF, outFeatures: outF };
    const dy = gpu.upload([rows, outF], 'f32', rng.floats(rows * outF, 1), 'dy');
    const w = gpu.upload([outF, inF], 'f32', rng.floats(outF * inF, 0.05), 'W');
    const x = gpu.upload([rows, inF], 'f32', rng.floats(rows * inF, 1), 'x');
    const dx = gpu.tensor([rows, inF], 'f32', 'dx');
    const dw = gpu.zeros([outF, inF], 'f32', 'dW');
    const t = { dy, w, x, dx, dw };
    const repeat = (run: () => Promise<void>) => async () => {
      for (let i = 0; i < CALLS; i++) await run();
    };
    const unfit = linearGradsPairUnfit(gpu, shape, t);
    const medians = await interleavedMedians(
      gpu,
      new Map([
        [unfit ? `linearGrads (two dispatches: ${unfit})` : 'linearGrads (one pair dispatch)', repeat(() => linearGrads(gpu, t, shape))],
        [
          'linearWeightGrad + linearInputGrad',
          repeat(async () => {
            await linearWeightGrad(gpu, dy, x, dw, shape);
            await linearInputGrad(gpu, dy, w, dx, shape);
          }),
        ],
      ]),
    );
    const flops = 2 * 2 * rows * inF * outF;
    for (const [variant, seconds] of medians) {
      const perCall = seconds / CALLS;
      out.push({ family: 'linear-grads', variant, shape: `${rows}x${inF}x${outF}`, ms: perCall * 1e3, gflops: flops / perCall / 1e9 });
    }
    gpu.release(dy, w, x, dx, dw);
  }
  return out;
}
