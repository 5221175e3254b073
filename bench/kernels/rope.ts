/**
 * RoPE benchmark: GB/s of the table rotation (read x, write y; positions and table are small), and
 * the stacked q | k | v split and join (rope/qkv-split, qkv-join) against the three dispatches each
 * replaces (rope/table on q, on k, copy/strided for v), timed interleaved at the EAGLE3 drafts' shapes.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { copyStrided } from '../../src/kernels/copy-strided.ts';
import { ropeQkvJoin, ropeQkvSplit } from '../../src/kernels/rope-qkv.ts';
import { buildRopeTable, inverseRopeTable, ropeTableForward } from '../../src/kernels/rope-table.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';

/** [rows, nHeads, headDim]: query heads of the mid EAGLE3 config and of Llama-8B. */
export const ROPE_BENCH_SHAPES: readonly [number, number, number][] = [
  [4096, 16, 64],
  [2048, 32, 128],
];

/** [rows, qHeads, kvHeads, headDim]: the fixture draft's step (2 × 40 tokens) and the mid draft's (1 × 128). */
export const ROPE_QKV_BENCH_SHAPES: readonly [number, number, number, number][] = [
  [80, 4, 2, 16],
  [128, 16, 4, 64],
];

export async function benchRope(gpu: Gpu, shapes: readonly [number, number, number][] = ROPE_BENCH_SHAPES): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(73);
  for (const [rows, nHeads, headDim] of shapes) {
    const n = rows * nHeads * headDim;
    const table = buildRopeTable({ headDim, ropeTheta: 500000, ropeScaling: { type: 'default' } }, 1024);
    const T = gpu.upload([1024, headDim / 2, 2], 'f32', table, 'table');
    const TI = gpu.upload([1024, headDim / 2, 2], 'f32', inverseRopeTable(table), 'inverse');
    const P = gpu.upload(
      [rows],
      'i32',
      Int32Array.from({ length: rows }, (_, r) => r % 1024),
      'positions',
    );
    const X = gpu.upload([rows, nHeads * headDim], 'f32', rng.floats(n), 'x');
    const Y = gpu.tensor([rows, nHeads * headDim], 'f32', 'y');
    const args = { rows, nHeads, headDim };
    const shape = `${rows}x${nHeads}x${headDim}`;
    const fwd = await medianSeconds(gpu, () => ropeTableForward(gpu, X, P, T, Y, args));
    out.push({ family: 'rope', variant: 'fwd (table)', shape, ms: fwd * 1e3, gbps: (2 * n * 4) / fwd / 1e9 });
    const bwd = await medianSeconds(gpu, () => ropeTableForward(gpu, X, P, TI, Y, args));
    out.push({ family: 'rope', variant: 'bwd (inverse table)', shape, ms: bwd * 1e3, gbps: (2 * n * 4) / bwd / 1e9 });
    gpu.release(T, TI, P, X, Y);
  }
  for (const shape of ROPE_QKV_BENCH_SHAPES) out.push(...(await benchRopeQkv(gpu, shape)));
  return out;
}

async function benchRopeQkv(gpu: Gpu, [rows, qHeads, kvHeads, headDim]: readonly [number, number, number, number]): Promise<BenchRecord[]> {
  const rng = new Rng(74);
  const [qDim, kvDim] = [qHeads * headDim, kvHeads * headDim];
  const W = qDim + 2 * kvDim;
  const table = buildRopeTable({ headDim, ropeTheta: 10000, ropeScaling: { type: 'default' } }, 256);
  const T = gpu.upload([256, headDim / 2, 2], 'f32', table, 'table');
  const P = gpu.upload(
    [rows],
    'i32',
    Int32Array.from({ length: rows }, (_, r) => r % 256),
    'positions',
  );
  const wide = gpu.upload([rows, W], 'f32', rng.floats(rows * W), 'qkv');
  const parts = {
    q: gpu.upload([rows, qDim], 'f32', rng.floats(rows * qDim), 'q'),
    k: gpu.upload([rows, kvDim], 'f32', rng.floats(rows * kvDim), 'k'),
    v: gpu.upload([rows, kvDim], 'f32', rng.floats(rows * kvDim), 'v'),
  };
  const args = { rows, qHeads, kvHeads, headDim };
  const rot = (heads: number, at: Record<string, number>) => ({ rows, nHeads: heads, headDim, ...at });
  const ms = await interleavedMedians(
    gpu,
    new Map<string, () => Promise<void>>([
      ['qkv-split', () => ropeQkvSplit(gpu, wide, P, T, parts, args)],
      [
        'split as 3 dispatches',
        async () => {
          await ropeTableForward(gpu, wide, P, T, parts.q, rot(qHeads, { strideX: W, offsetX: 0 }));
          await ropeTableForward(gpu, wide, P, T, parts.k, rot(kvHeads, { strideX: W, offsetX: qDim }));
          await copyStrided(gpu, wide, parts.v, { rows, width: kvDim, srcStride: W, srcOffset: qDim + kvDim });
        },
      ],
      ['qkv-join', () => ropeQkvJoin(gpu, parts, P, T, wide, args)],
      [
        'join as 3 dispatches',
        async () => {
          await ropeTableForward(gpu, parts.q, P, T, wide, rot(qHeads, { strideY: W, offsetY: 0 }));
          await ropeTableForward(gpu, parts.k, P, T, wide, rot(kvHeads, { strideY: W, offsetY: qDim }));
          await copyStrided(gpu, parts.v, wide, { rows, width: kvDim, dstStride: W, dstOffset: qDim + kvDim });
        },
      ],
    ]),
  );
  gpu.release(T, P, wide, parts.q, parts.k, parts.v);
  const bytes = 2 * rows * W * 4;
  return [...ms].map(([variant, s]) => ({
    family: 'rope',
    variant,
    shape: `${rows}x(${qHeads}+${kvHeads}+${kvHeads})x${headDim}`,
    ms: s * 1e3,
    gbps: bytes / s / 1e9,
  }));
}
