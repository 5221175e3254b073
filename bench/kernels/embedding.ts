/**
 * Embedding benchmark: GB/s of the gather (read N rows, write N rows) and of the deterministic
 * backward (clear dTable, link pass, scatter: reads dOut once and writes the touched rows; the
 * clear of the whole table is counted too, since it is part of the cost).
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { embeddingBackward, embeddingForward } from '../../src/kernels/embedding.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/** [n, vocab, hidden]: a mid-size draft batch (4096 tokens, V 32000, H 1024) and 2048 tokens at H 4096. */
export const EMBEDDING_BENCH_SHAPES: readonly [number, number, number][] = [
  [4096, 32000, 1024],
  [2048, 32000, 4096],
];

export async function benchEmbedding(
  gpu: Gpu,
  shapes: readonly [number, number, number][] = EMBEDDING_BENCH_SHAPES,
): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(74);
  for (const [n, vocab, hidden] of shapes) {
    // Zipf-like ids: a few hot tokens repeat many times, as in text.
    const ids = Int32Array.from({ length: n }, () => Math.min(vocab - 1, Math.floor(vocab ** rng.next()) - 1));
    const Ids = gpu.upload([n], 'i32', ids, 'ids');
    const Table = gpu.zeros([vocab, hidden], 'f32', 'table');
    const Out = gpu.tensor([n, hidden], 'f32', 'out');
    const Links = gpu.tensor([2 * n], 'i32', 'links');
    const shape = `N${n} V${vocab} H${hidden}`;
    const rowsBytes = n * hidden * 4;
    const fwd = await medianSeconds(gpu, () => embeddingForward(gpu, Ids, Table, Out, { n, vocab, hidden }));
    out.push({ family: 'embedding', variant: 'fwd', shape, ms: fwd * 1e3, gbps: (2 * rowsBytes) / fwd / 1e9 });
    const bwd = await medianSeconds(gpu, () => embeddingBackward(gpu, Ids, Out, Table, Links, { n, vocab, hidden }));
    out.push({ family: 'embedding', variant: 'bwd', shape, ms: bwd * 1e3, gbps: (2 * rowsBytes + vocab * hidden * 4) / bwd / 1e9 });
    gpu.release(Ids, Table, Out, Links);
  }
  return out;
}
