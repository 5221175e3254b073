/**
 * A linear layer and its residual add (src/kernels/linear-residual.ts): linearForwardResidual (one
 * dispatch where the device takes it) against a copy of the residual and the matmul with beta = 1,
 * interleaved round by round. Each timed encode runs the call CALLS times, so the figure is the
 * per-call cost inside a step's batch (command overhead included), which is what the fusion saves.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { copyRows } from '../../src/gpu/tensor-views.ts';
import { linearForward } from '../../src/kernels/linear.ts';
import { linearForwardResidual, linearResidualUnfit } from '../../src/kernels/linear-residual.ts';
import { Rng } from '../../src/util/random.ts';
import type { BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';

/** [rows, in, out]: the fixture draft's o and down projections (80 tokens), the lab draft's down (224), the mid config's (128). */
export const LINEAR_RESIDUAL_BENCH_SHAPES: readonly [number, number, number][] = [
  [80, 64, 64],
  [80, 176, 64],
  [224, 512, 128],
  [128, 2816, 1024],
];

const CALLS = 16;

export async function benchLinearResidual(
  gpu: Gpu,
  shapes: readonly [number, number, number][] = LINEAR_RESIDUAL_BENCH_SHAPES,
): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(95);
  for (const [R, inF, outF] of shapes) {
    const shape = { rows: R, inFeatures: inF, outFeatures: outF };
    const x = gpu.upload([R, inF], 'f32', rng.floats(R * inF, 1), 'x');
    const w = gpu.upload([outF, inF], 'f32', rng.floats(outF * inF, 0.05), 'W');
    const res = gpu.upload([R, outF], 'f32', rng.floats(R * outF, 1), 'res');
    const y = gpu.tensor([R, outF], 'f32', 'y');
    const t = { x, w, res, y };
    const repeat = (run: () => Promise<void>) => async () => {
      for (let i = 0; i < CALLS; i++) await run();
    };
    const unfit = linearResidualUnfit(gpu, shape, t);
    const medians = await interleavedMedians(
      gpu,
      new Map([
        [
          unfit ? `linearForwardResidual (copy + matmul: ${unfit})` : 'linearForwardResidual (one dispatch)',
          repeat(() => linearForwardResidual(gpu, t, shape)),
        ],
        [
          'copy + linearForward (beta 1)',
          repeat(async () => {
            copyRows(gpu, res, 0, y, 0, R);
            await linearForward(gpu, x, w, y, shape, { beta: 1 });
          }),
        ],
      ]),
    );
    for (const [variant, seconds] of medians) {
      const perCall = seconds / CALLS;
      out.push({
        family: 'linear-residual',
        variant,
        shape: `${R}x${inF}x${outF}`,
        ms: perCall * 1e3,
        gflops: (2 * R * inF * outF) / perCall / 1e9,
      });
    }
    gpu.release(x, w, res, y);
  }
  return out;
}
