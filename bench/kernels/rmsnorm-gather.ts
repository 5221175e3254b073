/**
 * RMSNorm of gathered embedding rows (src/kernels/rmsnorm-gather.ts) against the two dispatches it
 * replaces, interleaved: the forward against embedding/gather then rmsnorm/forward, and the weight
 * gradient against embedding/gather then rmsnorm's backward (dx and dw, as the draft's step ran it).
 * GB/s counts the gathered rows once per read; `vsTwo` is the two dispatches' time over the fused one's.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { embeddingForward } from '../../src/kernels/embedding.ts';
import { rmsnormBackward, rmsnormForward } from '../../src/kernels/rmsnorm.ts';
import { rmsnormGatherBackwardDw, rmsnormGatherForward } from '../../src/kernels/rmsnorm-gather.ts';
import { Rng } from '../../src/util/random.ts';
import type { BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';

/** Table rows: up to 32,000, at most 64 MiB of f32 (one binding under the default limits). */
const tableRows = (hidden: number) => Math.min(32000, Math.floor((64 * 2 ** 20) / (hidden * 4)));

export async function benchRmsnormGather(
  gpu: Gpu,
  shapes: readonly [number, number][],
  rounds = 7,
): Promise<(BenchRecord & { vsTwo: number })[]> {
  const out: (BenchRecord & { vsTwo: number })[] = [];
  const rng = new Rng(72);
  for (const [rows, hidden] of shapes) {
    const vocab = tableRows(hidden);
    const ids = Int32Array.from({ length: rows }, () => rng.int(0, vocab));
    const Ids = gpu.upload([rows], 'i32', ids, 'ids');
    const Table = gpu.upload([vocab, hidden], 'f32', rng.floats(vocab * hidden), 'table');
    const W = gpu.upload([hidden], 'f32', rng.floats(hidden), 'w');
    const X = gpu.tensor([rows, hidden], 'f32', 'x');
    const Y = gpu.tensor([rows, hidden], 'f32', 'y');
    const R = gpu.tensor([rows], 'f32', 'invRms');
    const DY = gpu.upload([rows, hidden], 'f32', rng.floats(rows * hidden), 'dy');
    const DX = gpu.tensor([rows, hidden], 'f32', 'dx scratch');
    const DW = gpu.tensor([hidden], 'f32', 'dw');
    const gather = { rows, vocab, hidden, seqLen: rows, shift: 1 };
    const shape = { n: rows, vocab, hidden };
    const shifted = { seqLen: rows, shift: 1 };
    const act = rows * hidden * 4;
    const passes = [
      {
        name: 'gather + fwd',
        bytes: 2 * act,
        fused: () => rmsnormGatherForward(gpu, Ids, Table, W, Y, R, { ...gather, eps: 1e-6 }),
        two: async () => {
          await embeddingForward(gpu, Ids, Table, X, shape, shifted);
          await rmsnormForward(gpu, X, W, Y, R, { rows, hidden, eps: 1e-6 });
        },
      },
      {
        name: 'gather + dw',
        bytes: 2 * act,
        fused: () => rmsnormGatherBackwardDw(gpu, Ids, Table, R, DY, DW, gather, { accumulate: true }),
        two: async () => {
          await embeddingForward(gpu, Ids, Table, X, shape, shifted);
          await rmsnormBackward(gpu, X, W, R, DY, DX, DW, { rows, hidden }, { accumulateDw: true });
        },
      },
    ];
    for (const pass of passes) {
      const ms = await interleavedMedians(
        gpu,
        new Map([
          ['fused', pass.fused],
          ['two', pass.two],
        ]),
        rounds,
      );
      for (const [name, s] of ms)
        out.push({
          family: 'rmsnorm',
          variant: `${pass.name} ${name === 'fused' ? 'one dispatch (rmsnorm/gather-*)' : 'embedding/gather, then rmsnorm'}`,
          shape: `${rows}x${hidden} of ${vocab}`,
          ms: s * 1e3,
          gbps: pass.bytes / s / 1e9,
          vsTwo: ms.get('two')! / s,
        });
    }
    gpu.release(Ids, Table, W, X, Y, R, DY, DX, DW);
  }
  return out;
}
