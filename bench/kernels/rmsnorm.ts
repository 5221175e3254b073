/**
 * RMSNorm benchmark: GB/s of forward and backward (each tensor read or written counted once), for
 * every row layout this device runs (src/kernels/row-variant.ts), timed interleaved; each record's
 * `vsWide` is the `wide` (original) variant's time over this one's. Then the gathering norm
 * (bench/kernels/rmsnorm-gather.ts) against embedding/gather followed by the plain norm.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { RMSNORM_ROW_GEOMETRY, rmsnormBackward, rmsnormForward } from '../../src/kernels/rmsnorm.ts';
import { availableRowVariants, rowDeviceFacts } from '../../src/kernels/row-variant.ts';
import { Rng } from '../../src/util/random.ts';
import type { BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';
import { benchRmsnormGather } from './rmsnorm-gather.ts';

/**
 * [rows, hidden]: the SpecForge fixture's draft norms (2 x 40 tokens, H 64), the lab config's (4 x 56
 * tokens, H 128), the mid EAGLE3 config (4 x 1024 tokens, H 1024) and Llama-8B dims (2048 tokens, H 4096).
 */
export const RMSNORM_BENCH_SHAPES: readonly [number, number][] = [
  [80, 64],
  [224, 128],
  [4096, 1024],
  [2048, 4096],
];

export type RowBenchRecord = BenchRecord & { vsWide?: number };

export async function benchRmsnorm(
  gpu: Gpu,
  shapes: readonly [number, number][] = RMSNORM_BENCH_SHAPES,
  rounds = 7,
): Promise<RowBenchRecord[]> {
  const out: RowBenchRecord[] = [];
  const rng = new Rng(71);
  const variants = availableRowVariants('rmsnorm', RMSNORM_ROW_GEOMETRY, gpu.ctx.features, rowDeviceFacts(gpu.ctx));
  for (const [rows, hidden] of shapes) {
    const X = gpu.upload([rows, hidden], 'f32', rng.floats(rows * hidden), 'x');
    const W = gpu.upload([hidden], 'f32', rng.floats(hidden), 'w');
    const Y = gpu.tensor([rows, hidden], 'f32', 'y');
    const R = gpu.tensor([rows], 'f32', 'invRms');
    const DY = gpu.upload([rows, hidden], 'f32', rng.floats(rows * hidden), 'dy');
    const DX = gpu.tensor([rows, hidden], 'f32', 'dx');
    const DW = gpu.tensor([hidden], 'f32', 'dw');
    const act = rows * hidden * 4;
    // Backward: the dx pass reads x, dy and writes dx; the dw pass reads x and dy again.
    const passes = [
      {
        name: 'fwd',
        bytes: 2 * act,
        run: (variant: (typeof variants)[number]) => rmsnormForward(gpu, X, W, Y, R, { rows, hidden, eps: 1e-6, variant }),
      },
      {
        // The subgroup layout fused (dx and dw in one dispatch) and unfused, at every size, whichever the
        // default picks (RMSNORM_FUSE_MAX_ELEMENTS).
        name: 'bwd (dx + dw) fused',
        bytes: 5 * act,
        run: (variant: (typeof variants)[number]) => rmsnormBackward(gpu, X, W, R, DY, DX, DW, { rows, hidden, variant }, { fuse: true }),
      },
      {
        name: 'bwd (dx + dw) unfused',
        bytes: 5 * act,
        run: (variant: (typeof variants)[number]) => rmsnormBackward(gpu, X, W, R, DY, DX, DW, { rows, hidden, variant }, { fuse: false }),
      },
    ];
    for (const pass of passes) {
      const ms = await interleavedMedians(gpu, new Map(variants.map((v) => [v, () => pass.run(v)])), rounds);
      for (const v of variants) {
        const s = ms.get(v)!;
        out.push({
          family: 'rmsnorm',
          variant: `${pass.name} ${v}`,
          shape: `${rows}x${hidden}`,
          ms: s * 1e3,
          gbps: pass.bytes / s / 1e9,
          vsWide: ms.get('wide')! / s,
        });
      }
    }
    gpu.release(X, W, Y, R, DY, DX, DW);
  }
  // The draft's input_layernorm gathers its embedding rows itself at the three smaller shapes' sizes.
  out.push(...(await benchRmsnormGather(gpu, shapes, rounds)));
  return out;
}
