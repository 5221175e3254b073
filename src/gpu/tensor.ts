/**
 * Tensor handles: shape + dtype + where the bytes live on the GPU.
 *
 * A tensor is a list of parts, each a contiguous byte range of one GPUBuffer holding whole rows
 * of the outermost dimension. Almost every tensor has one part; a tensor larger than one binding
 * (`maxStorageBufferBindingSize`, e.g. a 128256 x 4096 f32 lm_head = 2 GiB) is split into several
 * row ranges, each small enough to bind, and kernels dispatch once per part.
 */

export type DType = 'f32' | 'f16' | 'i32' | 'u32';

export const BYTES_PER_ELEMENT: Readonly<Record<DType, number>> = { f32: 4, f16: 2, i32: 4, u32: 4 };

export interface TensorPart {
  readonly buffer: GPUBuffer;
  readonly byteOffset: number;
  readonly byteLength: number;
  /** First row (index into shape[0]) held by this part. */
  readonly rowStart: number;
  readonly rowCount: number;
}

export class Tensor {
  readonly numel: number;
  readonly byteLength: number;
  constructor(
    readonly shape: readonly number[],
    readonly dtype: DType,
    readonly parts: readonly TensorPart[],
    readonly label = 'tensor',
  ) {
    this.numel = numelOf(shape);
    this.byteLength = this.numel * BYTES_PER_ELEMENT[dtype];
    const rows = shape.length === 0 ? 1 : shape[0];
    const covered = parts.reduce((n, p) => n + p.rowCount, 0);
    if (covered !== rows) throw new Error(`${label}: parts cover ${covered} rows, shape ${fmtShape(shape)} has ${rows}`);
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

  /** Elements per row of the outermost dimension. */
  get rowElements(): number {
    return this.shape.length === 0 ? 1 : this.numel / this.shape[0];
  }
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
 * Plan how many rows go in each part so that every part fits one binding.
 * `alignment` (minStorageBufferOffsetAlignment) only matters when parts share a buffer; SpecLab
 * gives each part its own buffer, so only the byte limit applies.
 */
export function planRowChunks(shape: readonly number[], dtype: DType, maxBindingBytes: number): number[] {
  const rows = shape.length === 0 ? 1 : shape[0];
  const rowBytes = (shape.length === 0 ? 1 : numelOf(shape.slice(1))) * BYTES_PER_ELEMENT[dtype];
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
