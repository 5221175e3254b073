/**
 * Linear layer over matmul for operands that may be split into row parts (src/gpu/tensor.ts):
 *   forward       y  = alpha · x · Wᵀ + beta · y      x [R, in], W [out, in], y [R, out]; W f32 or f16 (a
 *                                                    frozen target's weight: f16 storage, f32 arithmetic)
 *   input grad    dx = dy · W + beta · dx              dy [R, out], dx [R, in]
 *   weight grad   dW = dyᵀ · x + beta · dW             dW [out, in] (beta 1 by default: accumulate)
 * W and dW split by rows split the output features; x, y, dx, dy split by rows split R (a [B, S, W]
 * tensor is viewed as [B·S, W]). The Llama-3.1-8B draft needs this: fc, gate/up/down and lm_head
 * are each larger than a 128 MiB storage binding.
 *
 * When no operand is split the call is exactly the single matmul the draft always issued, so that
 * path is unchanged bit for bit. Otherwise the work is cut into blocks, one matmul each:
 *   - rows: segments of R inside which every row operand lies in one part. A segment is bound in
 *     place when it starts on the binding-offset alignment, else it goes through a scratch copy;
 *   - output features: one block per W (dW) part. The matching column slice of y or dy is not
 *     contiguous, so it goes through a scratch [rows, part] filled and written back with
 *     copyStrided (when beta ≠ 0 the scratch starts as a copy of y's slice).
 * The input gradient sums the W parts' contributions in part order (the first with the caller's
 * beta, the rest with beta = 1); the weight gradient sums row segments the same way. The loops run
 * in a fixed order, so results are deterministic. Every scratch is released before returning.
 */
import type { Gpu } from '../gpu/gpu.ts';
import { fmtShape, Tensor, type TensorPart } from '../gpu/tensor.ts';
import { copyStrided } from './copy-strided.ts';
import { chooseMatmulVariant, matmul, matmulDeviceFacts, resolvedMatmulShape } from './matmul.ts';

export interface LinearShape {
  /** R: rows of x, y, dx and dy. */
  rows: number;
  inFeatures: number;
  outFeatures: number;
}

export interface LinearOptions {
  alpha?: number;
  /** 0 overwrites the output; 1 adds to it (residual adds, gradient accumulation). */
  beta?: number;
}

/** y = alpha · x · Wᵀ + beta · y. */
export async function linearForward(
  gpu: Gpu,
  x: Tensor,
  w: Tensor,
  y: Tensor,
  shape: LinearShape,
  options: LinearOptions = {},
): Promise<void> {
  const { rows: R, inFeatures: K, outFeatures: N } = shape;
  const beta = options.beta ?? 0;
  checkLinearOperands('linearForward', shape, [
    ['x', x, R, K],
    ['W', w, N, K, 'f16'],
    ['y', y, R, N],
  ]);
  if (!x.isChunked && !w.isChunked && !y.isChunked) {
    await matmul(gpu, x, w, y, { M: R, N, K }, { transB: true, beta, ...alphaOf(options) });
    return;
  }
  for (const seg of segments(R, [x, y])) {
    const xb = await openBlock(gpu, x, R, K, seg, 0, K, 'read');
    try {
      for (const wp of spansOf(w, N)) {
        const yb = await openBlock(gpu, y, R, N, seg, wp.start, wp.count, beta !== 0 ? 'update' : 'write');
        try {
          await matmul(
            gpu,
            xb.tensor,
            partTensor(w, wp.part, K),
            yb.tensor,
            { M: seg.count, N: wp.count, K },
            { transB: true, beta, ...alphaOf(options) },
          );
          await yb.writeBack();
        } finally {
          yb.release();
        }
      }
    } finally {
      xb.release();
    }
  }
}

/** dx = dy · W + beta · dx (the input gradient of y = x · Wᵀ). */
export async function linearInputGrad(
  gpu: Gpu,
  dy: Tensor,
  w: Tensor,
  dx: Tensor,
  shape: LinearShape,
  options: LinearOptions = {},
): Promise<void> {
  const { rows: R, inFeatures: K, outFeatures: N } = shape;
  const beta = options.beta ?? 0;
  checkLinearOperands('linearInputGrad', shape, [
    ['dy', dy, R, N],
    ['W', w, N, K],
    ['dx', dx, R, K],
  ]);
  if (!dy.isChunked && !w.isChunked && !dx.isChunked) {
    await matmul(gpu, dy, w, dx, { M: R, N: K, K: N }, { beta, ...alphaOf(options) });
    return;
  }
  for (const seg of segments(R, [dy, dx])) {
    const dxb = await openBlock(gpu, dx, R, K, seg, 0, K, beta !== 0 ? 'update' : 'write');
    try {
      let first = true;
      for (const wp of spansOf(w, N)) {
        const dyb = await openBlock(gpu, dy, R, N, seg, wp.start, wp.count, 'read');
        try {
          await matmul(
            gpu,
            dyb.tensor,
            partTensor(w, wp.part, K),
            dxb.tensor,
            { M: seg.count, N: K, K: wp.count },
            { beta: first ? beta : 1, ...alphaOf(options) },
          );
        } finally {
          dyb.release();
        }
        first = false;
      }
      await dxb.writeBack();
    } finally {
      dxb.release();
    }
  }
}

/** dW = dyᵀ · x + beta · dW (the weight gradient of y = x · Wᵀ); beta defaults to 1. */
export async function linearWeightGrad(
  gpu: Gpu,
  dy: Tensor,
  x: Tensor,
  dw: Tensor,
  shape: LinearShape,
  options: LinearOptions = {},
): Promise<void> {
  const { rows: R, inFeatures: K, outFeatures: N } = shape;
  const beta = options.beta ?? 1;
  checkLinearOperands('linearWeightGrad', shape, [
    ['dy', dy, R, N],
    ['x', x, R, K],
    ['dW', dw, N, K],
  ]);
  if (!dy.isChunked && !x.isChunked && !dw.isChunked) {
    await matmul(gpu, dy, x, dw, { M: N, N: K, K: R }, { transA: true, beta, ...alphaOf(options) });
    return;
  }
  let first = true;
  for (const seg of segments(R, [dy, x])) {
    const xb = await openBlock(gpu, x, R, K, seg, 0, K, 'read');
    try {
      for (const wp of spansOf(dw, N)) {
        const dyb = await openBlock(gpu, dy, R, N, seg, wp.start, wp.count, 'read');
        try {
          await matmul(
            gpu,
            dyb.tensor,
            xb.tensor,
            partTensor(dw, wp.part, K),
            { M: wp.count, N: K, K: seg.count },
            { transA: true, beta: first ? beta : 1, ...alphaOf(options) },
          );
        } finally {
          dyb.release();
        }
      }
    } finally {
      xb.release();
    }
    first = false;
  }
}

function alphaOf(options: LinearOptions): { alpha?: number } {
  return options.alpha === undefined ? {} : { alpha: options.alpha };
}

/** An operand's name, tensor and [rows, width] view; 'f16' where f16 storage is also accepted (a frozen weight). */
export type LinearOperand = readonly [name: string, t: Tensor, rows: number, width: number, alsoF16?: 'f16'];

/** Fail closed: f32 (or f16 where allowed), exactly rows × width elements, parts of whole rows of the [rows, width] view. */
export function checkLinearOperands(op: string, shape: LinearShape, operands: readonly LinearOperand[]): void {
  for (const [what, v] of Object.entries(shape)) {
    if (!Number.isInteger(v) || v < 1) throw new Error(`${op}: ${what} must be a positive integer, got ${v}`);
  }
  for (const [name, t, rows, width, alsoF16] of operands) {
    if (t.dtype !== 'f32' && !(alsoF16 && t.dtype === 'f16'))
      throw new Error(`${op}: ${name} (${t.label}) must be f32${alsoF16 ? ' or f16' : ''}, got ${t.dtype}`);
    if (t.numel !== rows * width)
      throw new Error(`${op}: ${name} (${t.label} ${fmtShape(t.shape)}) must hold ${rows} × ${width} elements, has ${t.numel}`);
    if (t.isChunked && t.rowElements % width !== 0) {
      throw new Error(`${op}: ${name} (${t.label} ${fmtShape(t.shape)}) is split into parts that are not whole rows of width ${width}`);
    }
  }
}

/** A part's rows in units of the [rows, width] view. */
interface Span {
  part: TensorPart;
  start: number;
  count: number;
}

/** t's parts as row ranges of its [rows, ·] view (a [B, S, W] tensor split by B: S rows per part row; by B·S: 1). */
function spansOf(t: Tensor, rows: number): Span[] {
  const per = (rows * t.rowElements) / t.numel;
  return t.parts.map((part) => ({ part, start: part.rowStart * per, count: part.rowCount * per }));
}

/** The whole part as a single-part [count, width] tensor (binds the part's own buffer range). */
function partTensor(t: Tensor, part: TensorPart, width: number, rows = (part.rowCount * t.rowElements) / width): Tensor {
  return new Tensor([rows, width], t.dtype, [{ ...part, rowStart: 0, rowCount: rows }], `${t.label}[part@${part.rowStart}]`);
}

interface Segment {
  start: number;
  count: number;
}

/** Cut [0, rows) at every part edge of every operand, so each segment lies in one part of each. */
function segments(rows: number, tensors: readonly Tensor[]): Segment[] {
  const cuts = new Set<number>([0, rows]);
  for (const t of tensors) for (const s of spansOf(t, rows)) cuts.add(s.start);
  const edges = [...cuts].filter((e) => e >= 0 && e <= rows).sort((a, b) => a - b);
  return edges.slice(0, -1).map((start, i) => ({ start, count: edges[i + 1] - start }));
}

interface Block {
  /** A single-part [count, columns] tensor a matmul can bind. */
  readonly tensor: Tensor;
  /** Copy the block's scratch back into its place (nothing for a view). */
  writeBack(): Promise<void>;
  release(): void;
}

/**
 * Rows [seg.start, +count) × columns [col, +cols) of `t` viewed as [rows, width]: a view of the
 * part when the block is whole rows at an aligned offset, else a scratch copy ('read' fills it,
 * 'write' writes it back, 'update' does both).
 */
async function openBlock(
  gpu: Gpu,
  t: Tensor,
  rows: number,
  width: number,
  seg: Segment,
  col: number,
  cols: number,
  mode: 'read' | 'write' | 'update',
): Promise<Block> {
  const span = spansOf(t, rows).find((s) => seg.start >= s.start && seg.start < s.start + s.count);
  if (!span || seg.start + seg.count > span.start + span.count)
    throw new Error(`linear: ${t.label} rows [${seg.start}, ${seg.start + seg.count}) straddle its parts`);
  const local = seg.start - span.start;
  const byteOffset = span.part.byteOffset + local * width * 4;
  const align = gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256;
  if (col === 0 && cols === width && byteOffset % align === 0) {
    const part = { buffer: span.part.buffer, byteOffset, byteLength: seg.count * width * 4, rowStart: 0, rowCount: seg.count };
    const view = new Tensor([seg.count, width], t.dtype, [part], `${t.label}[${seg.start}:${seg.start + seg.count}]`);
    return { tensor: view, writeBack: async () => {}, release: () => {} };
  }
  const whole = partTensor(t, span.part, width, span.count);
  const scratch = gpu.tensor([seg.count, cols], 'f32', `${t.label}.block`);
  const place = { rows: seg.count, width: cols };
  const at = local * width + col;
  if (mode !== 'write') await copyStrided(gpu, whole, scratch, { ...place, srcStride: width, srcOffset: at });
  return {
    tensor: scratch,
    writeBack: async () => {
      if (mode !== 'read') await copyStrided(gpu, scratch, whole, { ...place, dstStride: width, dstOffset: at });
    },
    release: () => gpu.release(scratch),
  };
}

/**
 * Why y = x · Wᵀ of this shape (f32 W) does not run matmul/subgroup-vec4 on this device, or undefined
 * where it does: the kernels that fuse an epilogue into that variant's tile (linear-residual.ts,
 * linear-swiglu.ts) run only where the plain product would, so that they keep its bits.
 */
export function linearProductUnfit(gpu: Gpu, shape: LinearShape): string | undefined {
  const product = resolvedMatmulShape({ M: shape.rows, N: shape.outFeatures, K: shape.inFeatures }, { transB: true }, 'f32');
  const variant = chooseMatmulVariant(product, gpu.ctx.features, matmulDeviceFacts(gpu.ctx));
  return variant === 'subgroup-vec4' ? undefined : `the product runs matmul/${variant}`;
}
