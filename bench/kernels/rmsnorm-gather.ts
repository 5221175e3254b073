/**
 * RMSNorm of gathered embedding rows (src/kernels/rmsnorm-gather.ts) against the two dispatches it
 * replaces, interleaved: the forward against embedding/gather then rmsnorm/forward, and the weight
 * gradient against embedding/gather then rmsnorm's backward (dx and dw, as the draft's step ran it),
 * and the pair (rmsnorm-pair.ts: that norm and hidden_norm into the two halves of z, and their
 * backward where it runs) against the two dispatches each joins.
 * GB/s counts the gathered rows once per read; `vsTwo` is the two dispatches' time over the fused one's.
 * Small shapes run `repsFor` repetitions inside one timed region and report the time per
 * repetition: a single call of a few dispatches is shorter than a CPU adapter's timestamp step
 * (65.5 µs on llvmpipe), and the region's device time includes each launch's handoff to the driver.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { embeddingForward } from '../../src/kernels/embedding.ts';
import { rmsnormBackward, rmsnormForward } from '../../src/kernels/rmsnorm.ts';
import { rmsnormGatherBackwardDw, rmsnormGatherForward } from '../../src/kernels/rmsnorm-gather.ts';
import { pairBackwardUnfit, rmsnormPairBackward, rmsnormPairForward } from '../../src/kernels/rmsnorm-pair.ts';
import { elementView } from '../../src/gpu/tensor-views.ts';
import { Rng } from '../../src/util/random.ts';
import type { BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';

/** Repetitions per timed region: as many as keep the region near 2²⁰ elements per pass, 1 to 24. */
const repsFor = (rows: number, hidden: number) => Math.max(1, Math.min(24, Math.floor(2 ** 20 / (rows * hidden))));

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
    const H = gpu.upload([rows, hidden], 'f32', rng.floats(rows * hidden), 'h');
    const Z = gpu.tensor([rows, 2 * hidden], 'f32', 'z');
    const R2 = gpu.tensor([rows], 'f32', 'invRmsHidden');
    // z's hidden half as the step binds it (every shape here has hidden · 4 bytes on the alignment).
    const zHidden = elementView(gpu, Z, hidden, rows * 2 * hidden - hidden, 'z hidden');
    // The pair backward's two weight gradients: views of one buffer, as the optimizer holds them.
    const gradStride = Math.ceil(hidden / 64) * 64;
    const Grads = gpu.tensor([2 * gradStride], 'f32', 'grads');
    const grads = { dwHidden: elementView(gpu, Grads, 0, hidden, 'dwHidden'), dwEmb: elementView(gpu, Grads, gradStride, hidden, 'dwEmb') };
    const gather = { rows, vocab, hidden, seqLen: rows, shift: 1 };
    const shape = { n: rows, vocab, hidden };
    const shifted = { seqLen: rows, shift: 1 };
    const act = rows * hidden * 4;
    const passes = [
      {
        name: 'gather + fwd',
        kernel: 'rmsnorm/gather-forward',
        bytes: 2 * act,
        fused: () => rmsnormGatherForward(gpu, Ids, Table, W, Y, R, { ...gather, eps: 1e-6 }),
        two: async () => {
          await embeddingForward(gpu, Ids, Table, X, shape, shifted);
          await rmsnormForward(gpu, X, W, Y, R, { rows, hidden, eps: 1e-6 });
        },
      },
      {
        name: 'gather + dw',
        kernel: 'rmsnorm/gather-backward-dw',
        bytes: 2 * act,
        fused: () => rmsnormGatherBackwardDw(gpu, Ids, Table, R, DY, DW, gather, { accumulate: true }),
        two: async () => {
          await embeddingForward(gpu, Ids, Table, X, shape, shifted);
          await rmsnormBackward(gpu, X, W, R, DY, DX, DW, { rows, hidden }, { accumulateDw: true });
        },
      },
      {
        name: 'pair fwd',
        kernel: 'rmsnorm/pair-forward',
        bytes: 4 * act,
        fused: () =>
          rmsnormPairForward(
            gpu,
            { ids: Ids, table: Table, wEmb: W, x: H, wHidden: W, y: Z, invRmsEmb: R, invRmsHidden: R2 },
            { ...gather, eps: 1e-6, strideY: 2 * hidden },
          ),
        two: async () => {
          await rmsnormGatherForward(gpu, Ids, Table, W, Z, R, { ...gather, eps: 1e-6, strideY: 2 * hidden });
          await rmsnormForward(gpu, H, W, zHidden, R2, { rows, hidden, eps: 1e-6, strideY: 2 * hidden });
        },
      },
    ];
    // Where the pair backward runs (pairBackwardUnfit: the fused subgroup layout, small norms), against
    // rmsnormGatherBackwardDw then rmsnormBackward on the hidden half of dz, as the step ran them.
    if (pairBackwardUnfit(gpu, rows, hidden, grads) === undefined) {
      passes.push({
        name: 'pair bwd',
        kernel: 'rmsnorm/pair-backward-subgroup',
        bytes: 6 * act,
        fused: () =>
          rmsnormPairBackward(
            gpu,
            { ids: Ids, table: Table, x: H, wHidden: W, invRmsEmb: R, invRmsHidden: R2, dz: Z, dx: DX, ...grads },
            { ...gather, strideDy: 2 * hidden },
            { accumulateDx: true, accumulateDw: true },
          ),
        two: async () => {
          await rmsnormGatherBackwardDw(gpu, Ids, Table, R, Z, grads.dwEmb, { ...gather, strideDy: 2 * hidden }, { accumulate: true });
          await rmsnormBackward(
            gpu,
            H,
            W,
            R2,
            zHidden,
            DX,
            grads.dwHidden,
            { rows, hidden, strideY: 2 * hidden },
            {
              accumulateDx: true,
              accumulateDw: true,
            },
          );
        },
      });
    }
    const reps = repsFor(rows, hidden);
    const repeated = (run: () => Promise<void>) => async () => {
      for (let i = 0; i < reps; i++) await run();
    };
    for (const pass of passes) {
      const ms = await interleavedMedians(
        gpu,
        new Map([
          ['fused', repeated(pass.fused)],
          ['two', repeated(pass.two)],
        ]),
        rounds,
      );
      for (const [name, s] of ms)
        out.push({
          family: 'rmsnorm',
          variant: `${pass.name} ${name === 'fused' ? `one dispatch (${pass.kernel})` : 'two dispatches'}`,
          shape: `${rows}x${hidden} of ${vocab}`,
          ms: (s / reps) * 1e3,
          gbps: (pass.bytes * reps) / s / 1e9,
          vsTwo: ms.get('two')! / s,
        });
    }
    gpu.release(Ids, Table, W, X, Y, R, DY, DX, DW, H, Z, R2, Grads);
  }
  return out;
}
