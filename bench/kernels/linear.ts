/**
 * Linear layer benchmark (src/kernels/linear.ts): GFLOP/s of forward, input grad and weight grad
 * with the weight whole and split into 4 row parts (a binding limit lowered to a quarter of the
 * weight, as the 500 MiB Llama-3 draft lm_head splits under 128 MiB), interleaved, so the ratio
 * shows what the per-part matmuls and the scratch copies of the column slices cost.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { linearForward, linearInputGrad, linearWeightGrad, type LinearShape } from '../../src/kernels/linear.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/** [rows, in, out]: the draft lm_head at 2048 tokens (Llama-3: H 4096, D 32000). */
export const LINEAR_BENCH_SHAPES: readonly [number, number, number][] = [[2048, 4096, 32000]];
/** The same product at 32 tokens and a quarter of the width, for software adapters. */
export const LINEAR_CPU_SHAPES: readonly [number, number, number][] = [[32, 1024, 8000]];

export async function benchLinear(gpu: Gpu, shapes: readonly [number, number, number][] = LINEAR_BENCH_SHAPES): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(91);
  // A second Gpu on the same device plans with a binding limit of a quarter of the weight's bytes.
  const split = new Gpu(gpu.ctx);
  try {
    for (const [rows, inF, outF] of shapes) {
      Object.defineProperty(split, 'maxBindingBytes', { value: outF * inF, configurable: true });
      const shape: LinearShape = { rows, inFeatures: inF, outFeatures: outF };
      const flops = 2 * rows * inF * outF;
      const x = rng.floats(rows * inF, 1);
      const w = rng.floats(outF * inF, 0.02);
      const dy = rng.floats(rows * outF, 1);
      const label = `${rows}x${inF}x${outF}`;
      for (const [name, g] of [
        ['whole', gpu],
        ['split4', split],
      ] as const) {
        const X = g.upload([rows, inF], 'f32', x, 'x');
        const W = g.upload([outF, inF], 'f32', w, 'W');
        const DY = g.upload([rows, outF], 'f32', dy, 'dy');
        const Y = g.tensor([rows, outF], 'f32', 'y');
        const DX = g.tensor([rows, inF], 'f32', 'dx');
        const DW = g.zeros([outF, inF], 'f32', 'dW');
        const runs: [string, () => Promise<void>][] = [
          ['fwd', () => linearForward(g, X, W, Y, shape)],
          ['dx', () => linearInputGrad(g, DY, W, DX, shape)],
          ['dw', () => linearWeightGrad(g, DY, X, DW, shape)],
        ];
        for (const [dir, run] of runs) {
          const s = await medianSeconds(g, run, 3);
          out.push({
            family: 'linear',
            variant: `${name} ${dir} (${W.parts.length} part${W.parts.length > 1 ? 's' : ''})`,
            shape: label,
            ms: s * 1e3,
            gflops: flops / s / 1e9,
          });
        }
        g.release(X, W, DY, Y, DX, DW);
      }
    }
  } finally {
    split.destroy();
  }
  return out;
}
