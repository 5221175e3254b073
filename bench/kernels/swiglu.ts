/** SwiGLU benchmark: GB/s of forward (2 reads, 1 write) and backward (3 reads, 2 writes). */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { swigluBackward, swigluBackwardPacked, swigluForward, swigluForwardPacked } from '../../src/kernels/swiglu.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/** [rows, inter]: mid EAGLE3 config (4096 tokens, I 2816) and Llama-8B (2048 tokens, I 14336). */
export const SWIGLU_BENCH_SHAPES: readonly [number, number][] = [
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
    // The packed layout (gate | up per row), as the EAGLE3 draft's MLP runs it.
    const GU = gpu.upload([rows, 2 * inter], 'f32', rng.floats(2 * n, 4), 'gu');
    const DGU = gpu.tensor([rows, 2 * inter], 'f32', 'dgu');
    const fwdPacked = await medianSeconds(gpu, () => swigluForwardPacked(gpu, GU, H, { rows, inter }));
    out.push({ family: 'swiglu', variant: 'fwd-packed', shape, ms: fwdPacked * 1e3, gbps: (3 * n * 4) / fwdPacked / 1e9 });
    const bwdPacked = await medianSeconds(gpu, () => swigluBackwardPacked(gpu, GU, H, DGU, { rows, inter }));
    out.push({ family: 'swiglu', variant: 'bwd-packed', shape, ms: bwdPacked * 1e3, gbps: (5 * n * 4) / bwdPacked / 1e9 });
    gpu.release(G, U, H, DG, DU, GU, DGU);
  }
  return out;
}
