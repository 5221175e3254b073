/**
 * Tensor handles: shape + dtype + where the bytes live on the GPU.
 *
 * A tensor is a list of parts, each a contiguous byte range of one GPUBuffer holding whole rows.
 * Almost every tensor has one part; a tensor larger than one binding (`maxStorageBufferBindingSize`,
 * e.g. a 128256 x 4096 f32 lm_head = 2 GiB) is split into several row ranges, each small enough to
 * bind, and kernels dispatch once per part.
 *
 * Rows are those of the outermost dimension, unless one of them is itself larger than a binding: a
 * batch of full-vocabulary logits [B, S, V] whose [S, V] slab exceeds a binding is split over its
 * B·S rows of V instead (`splitDims` = 2: the parts count rows of the first two dimensions). Every
 * part still starts at a whole row of that view, so code that reads a part as a range of elements
 * (element offset = rowStart · rowElements) never needs to know which.
 */

export type DType = 'f32' | 'f16' | 'i32' | 'u32';

export const BYTES_PER_ELEMENT: Readonly<Record<DType, number>> = { f32: 4, f16: 2, i32: 4, u32: 4 };

export interface TensorPart {
  readonly buffer: GPUBuffer;
  readonly byteOffset: number;
  readonly byteLength: number;
  /** First row held by this part (rows of the first `splitDims` dimensions: usually of shape[0]). */
  readonly rowStart: number;
  readonly rowCount: number;
}

export class Tensor {
  readonly numel: number;
  readonly byteLength: number;
  /** Rows the parts are counted in: the product of the first `splitDims` dimensions (1 for a scalar). */
  readonly rows: number;
  constructor(
    readonly shape: readonly number[],
    readonly dtype: DType,
    readonly parts: readonly TensorPart[],
    readonly label = 'tensor',
    /** How many leading dimensions a part's rows span (1: rows of shape[0]). */
    readonly splitDims = 1,
  ) {
    this.numel = numelOf(shape);
    this.byteLength = this.numel * BYTES_PER_ELEMENT[dtype];
    if (!Number.isInteger(splitDims) || splitDims < 1 || (shape.length > 0 && splitDims > shape.length))
      throw new Error(`${label}: splitDims ${splitDims} outside 1..${Math.max(1, shape.length)} for shape ${fmtShape(shape)}`);
    this.rows = rowsOf(shape, splitDims);
    const covered = parts.reduce((n, p) => n + p.rowCount, 0);
    if (covered !== this.rows) throw new Error(`${label}: parts cover ${covered} rows, shape ${fmtShape(shape)} has ${this.rows}`);
  }

  get isChunked(): boolean {
    return this.parts.length > 1;
  }

  /** The single part of an unchunked tensor; throws (naming the tensor) for a chunked one. */
  get part(): TensorPart {
    if (this.parts.length !== 1) {
      throw new Error(
        `${this.label} ${fmtShape(this.shape)} is split into ${this.parts.length} parts; this operation needs the chunked path`,
      );
    }
    return this.parts[0];
  }

  /** Binding resource for the single part. */
  binding(): GPUBufferBinding {
    const p = this.part;
    return { buffer: p.buffer, offset: p.byteOffset, size: p.byteLength };
  }

  /** Elements per row (of the outermost dimension, or of the first `splitDims` when a part spans those). */
  get rowElements(): number {
    return this.shape.length === 0 ? 1 : this.numel / this.rows;
  }
}

/** Rows of `shape` counted over its first `splitDims` dimensions (1 for a scalar). */
function rowsOf(shape: readonly number[], splitDims: number): number {
  return shape.length === 0 ? 1 : shape.slice(0, splitDims).reduce((a, d) => a * d, 1);
}

export function numelOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) throw new Error(`invalid dimension ${d} in shape ${fmtShape(shape)}`);
    n *= d;
  }
  return n;
}

export function fmtShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

/**
 * Plan how many rows go in each part so that every part fits one binding (rows of the outermost
 * dimension; a row larger than a binding is refused, naming the shape).
 * `alignment` (minStorageBufferOffsetAlignment) only matters when parts share a buffer; SpecLab
 * gives each part its own buffer, so only the byte limit applies.
 */
export function planRowChunks(shape: readonly number[], dtype: DType, maxBindingBytes: number): number[] {
  return chunkRows(shape, 1, dtype, maxBindingBytes);
}

/** How Gpu.tensor lays a tensor out: the leading dimensions its parts span, and the rows in each part. */
export interface TensorLayout {
  readonly splitDims: number;
  readonly counts: number[];
}

/**
 * The layout Gpu.tensor gives `shape`: parts of whole rows of the outermost dimension when one such
 * row fits a binding, else of the first two dimensions (a [B, S, V] batch whose [S, V] slab does
 * not fit), and so on; refused, naming the shape, when even one innermost row is larger than a binding.
 */
export function planTensorLayout(shape: readonly number[], dtype: DType, maxBindingBytes: number): TensorLayout {
  // The innermost dimension is never cut: a row of it is what kernels read as one row.
  const deepest = Math.max(1, shape.length - 1);
  for (let splitDims = 1; splitDims < deepest; splitDims++) {
    const rowBytes = numelOf(shape.slice(splitDims)) * BYTES_PER_ELEMENT[dtype];
    if (rowBytes <= maxBindingBytes) return { splitDims, counts: chunkRows(shape, splitDims, dtype, maxBindingBytes) };
  }
  return { splitDims: deepest, counts: chunkRows(shape, deepest, dtype, maxBindingBytes) };
}

function chunkRows(shape: readonly number[], splitDims: number, dtype: DType, maxBindingBytes: number): number[] {
  const rows = rowsOf(shape, splitDims);
  const rowBytes = (shape.length === 0 ? 1 : numelOf(shape.slice(splitDims))) * BYTES_PER_ELEMENT[dtype];
  if (rowBytes > maxBindingBytes) {
    throw new Error(
      `one row of ${fmtShape(shape)} ${dtype} is ${rowBytes} bytes, more than the binding limit ${maxBindingBytes}; split the inner dimension`,
    );
  }
  const total = rows * rowBytes;
  if (total <= maxBindingBytes || rows <= 1) return [rows];
  const perPart = Math.max(1, Math.floor(maxBindingBytes / rowBytes));
  const counts: number[] = [];
  for (let r = 0; r < rows; r += perPart) counts.push(Math.min(perPart, rows - r));
  return counts;
}

/** One contiguous byte range shared by a part of `src` and a part of `dst`. */
export interface PartOverlap {
  readonly src: TensorPart;
  readonly srcByte: number;
  readonly dst: TensorPart;
  readonly dstByte: number;
  readonly bytes: number;
}

/**
 * Where elements [srcElement, +count) of `src` and [dstElement, +count) of `dst` (same dtype) lie
 * in their parts: one byte range per overlap of a src part and a dst part, in element order, with
 * byte offsets inside each part's buffer. Works for any split of either tensor (parts are ranges of
 * whole rows, so a part is a range of elements).
 */
export function partOverlaps(src: Tensor, srcElement: number, dst: Tensor, dstElement: number, count: number): PartOverlap[] {
  const bytes = BYTES_PER_ELEMENT[src.dtype];
  const out: PartOverlap[] = [];
  const dstStarts = dst.parts.map((p) => p.rowStart * dst.rowElements);
  for (const s of src.parts) {
    const sStart = s.rowStart * src.rowElements;
    const from = Math.max(srcElement, sStart);
    const to = Math.min(srcElement + count, sStart + s.rowCount * src.rowElements);
    for (let e = from; e < to;) {
      const target = e - srcElement + dstElement;
      let i = dst.parts.length - 1;
      while (i > 0 && dstStarts[i] > target) i--;
      const d = dst.parts[i];
      const n = Math.min(to - e, dstStarts[i] + d.rowCount * dst.rowElements - target);
      out.push({
        src: s,
        srcByte: s.byteOffset + (e - sStart) * bytes,
        dst: d,
        dstByte: d.byteOffset + (target - dstStarts[i]) * bytes,
        bytes: n * bytes,
      });
      e += n;
    }
  }
  return out;
}
