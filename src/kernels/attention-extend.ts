/**
 * Extend attention: m new query rows of ONE sequence against its KV cache, causally — query row i
 * sits at position start + i and sees cache rows 0..start + i (its own key included). This is what a
 * speculative-decoding verification (the target over [last token, k draft tokens]) and a draft's
 * catch-up over newly accepted positions need.
 *
 * Built from the decode kernel (attention-decode.ts, float64 twin src/reference/attention-decode.ts)
 * rather than a new shader: each query row is copied into its own [1, nH, hd] tensor and runs one
 * decode dispatch with its visible length start + i + 1; the output row is copied back. m dispatches
 * per call, which is fine for the handful of rows a verification step has.
 *
 * Layouts (row-major f32): q, o [m, nH·hd]; kCache, vCache [1, T, nKV, hd] with rows 0..start+m−1
 * already written (RoPE applied to keys).
 */
import type { Gpu } from '../gpu/gpu.ts';
import { fmtShape, type Tensor } from '../gpu/tensor.ts';
import { elementView } from '../gpu/tensor-views.ts';
import { decodeAttentionForward } from './attention-decode.ts';

export interface ExtendAttentionDims {
  /** Query rows m. */
  rows: number;
  /** Position of query row 0 (= cache rows before this extension). */
  start: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** Cache capacity T. */
  maxLen: number;
}

/** Encode o[i] = attention(q[i], cache[0 .. start + i]) for i < rows (no submit). */
export async function extendAttentionForward(
  gpu: Gpu,
  t: { q: Tensor; kCache: Tensor; vCache: Tensor; o: Tensor },
  d: ExtendAttentionDims,
): Promise<void> {
  const { rows: m, start, heads, headDim, maxLen } = d;
  if (!Number.isInteger(m) || m < 1) throw new Error(`extendAttention: rows must be a positive integer, got ${m}`);
  if (!Number.isInteger(start) || start < 0) throw new Error(`extendAttention: start must be an integer ≥ 0, got ${start}`);
  if (start + m > maxLen) throw new Error(`extendAttention: positions ${start}..${start + m - 1} exceed the cache capacity ${maxLen}`);
  const width = heads * headDim;
  for (const [name, x] of [
    ['q', t.q],
    ['o', t.o],
  ] as const) {
    if (x.numel !== m * width) throw new Error(`extendAttention: ${name} (${x.label} ${fmtShape(x.shape)}) must hold [${m}, ${width}]`);
    if (x.isChunked) throw new Error(`extendAttention: ${name} (${x.label}) is split into parts`);
  }
  const rowBytes = width * 4;
  // Every row's visible length in one upload, each on its own binding-offset boundary.
  const stride = (gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256) / 4;
  const lengthsHost = new Int32Array(m * stride);
  for (let i = 0; i < m; i++) lengthsHost[i * stride] = start + i + 1;
  const lengths = gpu.upload([m * stride], 'i32', lengthsHost, 'extend.lengths');
  const qRow = gpu.tensor([1, heads, headDim], 'f32', 'extend.qRow');
  const oRow = gpu.tensor([1, heads, headDim], 'f32', 'extend.oRow');
  try {
    for (let i = 0; i < m; i++) {
      // Commands are encoded in order, so one scratch pair serves every row.
      gpu.batcher.copyBuffer(t.q.part.buffer, t.q.part.byteOffset + i * rowBytes, qRow.part.buffer, qRow.part.byteOffset, rowBytes);
      const length = elementView(gpu, lengths, i * stride, 1, 'extend.length');
      await decodeAttentionForward(
        gpu,
        { q: qRow, kCache: t.kCache, vCache: t.vCache, lengths: length, o: oRow },
        { batch: 1, heads, kvHeads: d.kvHeads, headDim, maxLen },
      );
      gpu.batcher.copyBuffer(oRow.part.buffer, oRow.part.byteOffset, t.o.part.buffer, t.o.part.byteOffset + i * rowBytes, rowBytes);
    }
  } finally {
    gpu.release(qRow, oRow, lengths);
  }
}
