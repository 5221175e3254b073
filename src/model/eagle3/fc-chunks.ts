/**
 * The draft's fc, h_in⁰ = Haux · W_fcᵀ, and its weight gradient, on aux hidden states Haux [R, 3·Ht]
 * that may be f16 (features stored with `--feature-precision f16`).
 *
 * f32 Haux is read whole, as it always was. f16 Haux is widened to f32 a row chunk at a time, right
 * before the chunk's matmul, and the widened rows are released after it, so no f32 copy of the whole
 * batch exists: at 32,768 tokens of an 8B target that copy alone is 1.5 GiB. One chunk of all R rows
 * (`fcChunkRows` at lab sizes) is the widening the strategy used to do, so its bits are unchanged.
 * Over several chunks every row of h_in⁰ is the same kernel's on the same widened values; W_fc's
 * gradient is summed chunk by chunk, a different order of the same terms (within 1e-6 relative;
 * test/model/eagle3-fc-chunks.test.ts). `rowsAsF32` is the one rule for reading rows of a possibly
 * f16 feature as f32, shared with the teacher's compact source (teacher-source.ts).
 */
import type { Gpu } from '../../gpu/gpu.ts';
import { rowChunkRows } from '../../gpu/row-chunks.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { copyRows } from '../../gpu/tensor-views.ts';
import { castF16ToF32 } from '../../kernels/cast.ts';
import { linearForward, linearWeightGrad } from '../../kernels/linear.ts';

/** Rows per chunk of the fc over f16 features: all R when [R, 3·Ht] f32 fits one binding and 128 MiB. */
export function fcChunkRows(rows: number, auxWidth: number, maxBindingBytes: number): number {
  return rowChunkRows(rows, auxWidth * 4, maxBindingBytes);
}

/**
 * Rows [r0, r0 + n) of `t` [R, W] (f32 or f16) as f32 [n, W]: `t` itself when it is f32 and the rows
 * are all of it; otherwise a new tensor (`made` true) the caller releases once its readers are encoded.
 * f16 rows are copied into an f16 chunk, then widened exactly.
 */
export async function rowsAsF32(
  gpu: Gpu,
  t: Tensor,
  r0: number,
  n: number,
  rows: number,
  label: string,
): Promise<{ rows: Tensor; made: boolean }> {
  const width = t.numel / rows;
  if (t.dtype === 'f32' && n === rows) return { rows: t, made: false };
  // All rows keep the tensor's own shape ([B, S, W] as the f32 feature would be); a chunk is [n, W].
  const out = gpu.tensor(n === rows ? [...t.shape] : [n, width], 'f32', label);
  try {
    if (t.dtype === 'f32') {
      copyRows(gpu, t, r0, out, 0, n);
      return { rows: out, made: true };
    }
    const half = n === rows ? t : gpu.tensor([n, width], 'f16', `${label}.f16`);
    try {
      if (half !== t) copyRows(gpu, t, r0, half, 0, n);
      await castF16ToF32(gpu, half, out);
    } finally {
      if (half !== t) gpu.release(half);
    }
    return { rows: out, made: true };
  } catch (err) {
    gpu.release(out);
    throw err;
  }
}

interface FcShape {
  rows: number;
  /** 3·Ht. */
  inFeatures: number;
  /** The draft's hidden size. */
  outFeatures: number;
  chunkRows: number;
}

/** h_in⁰ = Haux · W_fcᵀ into `hidden0` [R, H]. */
export async function fcForward(gpu: Gpu, haux: Tensor, weight: Tensor, hidden0: Tensor, x: FcShape, tag: string): Promise<void> {
  const { rows: R, inFeatures, outFeatures: H } = x;
  if (haux.dtype === 'f32') {
    await linearForward(gpu, haux, weight, hidden0, { rows: R, inFeatures, outFeatures: H });
    return;
  }
  for (let r0 = 0; r0 < R; r0 += x.chunkRows) {
    const n = Math.min(x.chunkRows, R - r0);
    const wide = await rowsAsF32(gpu, haux, r0, n, R, `${tag}.fc.x[${r0}:]`);
    const y = n === R ? hidden0 : gpu.tensor([n, H], 'f32', `${tag}.fc.y[${r0}:]`);
    try {
      await linearForward(gpu, wide.rows, weight, y, { rows: n, inFeatures, outFeatures: H });
      if (y !== hidden0) copyRows(gpu, y, 0, hidden0, r0, n);
    } finally {
      if (wide.made) gpu.release(wide.rows);
      if (y !== hidden0) gpu.release(y);
    }
  }
}

/** W_fc.grad += dHidden0ᵀ · Haux. */
export async function fcWeightGrad(gpu: Gpu, dHidden0: Tensor, haux: Tensor, grad: Tensor, x: FcShape, tag: string): Promise<void> {
  const { rows: R, inFeatures, outFeatures: H } = x;
  if (haux.dtype === 'f32') {
    await linearWeightGrad(gpu, dHidden0, haux, grad, { rows: R, inFeatures, outFeatures: H }, { beta: 1 });
    return;
  }
  for (let r0 = 0; r0 < R; r0 += x.chunkRows) {
    const n = Math.min(x.chunkRows, R - r0);
    const wide = await rowsAsF32(gpu, haux, r0, n, R, `${tag}.fc.x[${r0}:]`);
    const dy = await rowsAsF32(gpu, dHidden0, r0, n, R, `${tag}.fc.dy[${r0}:]`);
    try {
      await linearWeightGrad(gpu, dy.rows, wide.rows, grad, { rows: n, inFeatures, outFeatures: H }, { beta: 1 });
    } finally {
      if (wide.made) gpu.release(wide.rows);
      if (dy.made) gpu.release(dy.rows);
    }
  }
}
