/** SwiGLU benchmark: GB/s of forward (2 reads, 1 write) and backward (3 reads, 2 writes). */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { rowChunkRows } from '../../src/gpu/row-chunks.ts';
import { elementGrid } from '../../src/kernels/elementwise-common.ts';
import { SWIGLU_KERNELS, swigluBackward, swigluBackwardPacked, swigluForward, swigluForwardPacked } from '../../src/kernels/swiglu.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/**
 * [rows, inter]: the fixture draft's MLP (80 tokens, I 176), the mid EAGLE3 config (4096 tokens,
 * I 2816) and Llama-8B (2048 tokens, I 14336).
 */
export const SWIGLU_BENCH_SHAPES: readonly [number, number][] = [
  [80, 176],
  [4096, 2816],
  [2048, 14336],
];

export async function benchSwiglu(gpu: Gpu, shapes: readonly [number, number][] = SWIGLU_BENCH_SHAPES): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(72);
  for (const [rows, inter] of shapes) {
    const n = rows * inter;
    const G = gpu.upload([rows, inter], 'f32', rng.floats(n, 4), 'gate');
    const U = gpu.upload([rows, inter], 'f32', rng.floats(n), 'up');
    const H = gpu.tensor([rows, inter], 'f32', 'h');
    const DG = gpu.tensor([rows, inter], 'f32', 'dgate');
    const DU = gpu.tensor([rows, inter], 'f32', 'dup');
    const shape = `${rows}x${inter}`;
    const fwd = await medianSeconds(gpu, () => swigluForward(gpu, G, U, H, { rows, inter }));
    out.push({ family: 'swiglu', variant: 'fwd', shape, ms: fwd * 1e3, gbps: (3 * n * 4) / fwd / 1e9 });
    const bwd = await medianSeconds(gpu, () => swigluBackward(gpu, G, U, H, DG, DU, { rows, inter }));
    out.push({ family: 'swiglu', variant: 'bwd', shape, ms: bwd * 1e3, gbps: (5 * n * 4) / bwd / 1e9 });
    gpu.release(G, U, DG, DU);
    // The packed layout (gate | up per row), as the EAGLE3 draft's MLP runs it: over row chunks when
    // the packed [rows, 2 · inter] does not fit one binding (model/eagle3/mlp-chunks.ts), so the
    // record times one chunk's dispatch and names its rows.
    const chunk = rowChunkRows(rows, 2 * inter * 4, gpu.ctx.limits.maxStorageBufferBindingSize);
    const m = chunk * inter;
    const GU = gpu.upload([chunk, 2 * inter], 'f32', rng.floats(2 * m, 4), 'gu');
    const DGU = gpu.tensor([chunk, 2 * inter], 'f32', 'dgu');
    const packedShape = `${chunk}x${inter}`;
    const record = (variant: string, seconds: number, accesses: number) =>
      out.push({ family: 'swiglu', variant, shape: packedShape, ms: seconds * 1e3, gbps: (accesses * m * 4) / seconds / 1e9 });
    // What the host picks (four columns per invocation where inter allows), then the one-column
    // kernels dispatched directly on the same operands, for the ratio.
    record('fwd-packed', await medianSeconds(gpu, () => swigluForwardPacked(gpu, GU, H, { rows: chunk, inter })), 3);
    record('bwd-packed', await medianSeconds(gpu, () => swigluBackwardPacked(gpu, GU, H, DGU, { rows: chunk, inter })), 5);
    const oneColumn = new Uint32Array([chunk, inter]);
    const [fwd1, bwd1] = await Promise.all([
      gpu.pipelines.get(SWIGLU_KERNELS.forwardPacked),
      gpu.pipelines.get(SWIGLU_KERNELS.backwardPacked),
    ]);
    const grid = elementGrid(gpu, m);
    record(
      'fwd-packed one column',
      await medianSeconds(gpu, () => gpu.batcher.dispatch(fwd1, oneColumn, [GU.binding(), H.binding()], grid)),
      3,
    );
    record(
      'bwd-packed one column',
      await medianSeconds(gpu, () => gpu.batcher.dispatch(bwd1, oneColumn, [GU.binding(), H.binding(), DGU.binding()], grid)),
      5,
    );
    gpu.release(H, GU, DGU);
  }
  return out;
}
