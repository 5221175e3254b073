/**
 * Where an in-process backend keeps the bytes of each (partition, sample, field) cell.
 *
 * The seam is deliberately small so another store (e.g. the GPU feature store) can back the local
 * transfer queue later: `prepare` makes the store's own copy without touching shared state (it may
 * need the GPU, hence async), and `install`/`free` are synchronous so the backend can commit a
 * whole put — bytes plus production bits — in one step that no other call can interleave with.
 */
import type { Gpu } from '../gpu/gpu.ts';
import { BYTES_PER_ELEMENT, numelOf, Tensor, type DType } from '../gpu/tensor.ts';
import { DTYPES, isDType } from './names.ts';
import { DataPlaneError, type HostData, type HostTensor, type RowValue } from './types.ts';

export interface ColumnStore {
  /** `host`: typed-array copies; `gpu`: GPU tensor copies; `caller`: the caller's objects by reference. */
  readonly residency: 'host' | 'gpu' | 'caller';
  /** The store's copy of `value`, not yet installed (so a failed put can `discard` it). */
  prepare(value: RowValue, label: string): Promise<RowValue>;
  /** Make `prepared` the content of `cell`; the previous content, if any, is freed first. */
  install(cell: string, prepared: RowValue): void;
  /** The cell's value. Host stores return a copy; GPU stores lend their tensor until the cell is freed. */
  read(cell: string): RowValue | undefined;
  free(cell: string): void;
  discard(prepared: RowValue): void;
  /** Bytes currently held in installed cells. */
  readonly bytesHeld: number;
  /** Frees every cell. */
  close(): void;
}

export function isTensor(value: RowValue): value is Tensor {
  return value instanceof Tensor;
}

export function rowBytes(value: RowValue): number {
  return isTensor(value) ? value.byteLength : value.data.byteLength;
}

/** The typed-array class that holds each dtype on the host (f16 as raw bits). */
export function hostArray(dtype: DType, buffer: ArrayBuffer, byteOffset = 0, length?: number): HostData {
  switch (dtype) {
    case 'f32':
      return new Float32Array(buffer, byteOffset, length);
    case 'i32':
      return new Int32Array(buffer, byteOffset, length);
    case 'u32':
      return new Uint32Array(buffer, byteOffset, length);
    case 'f16':
      return new Uint16Array(buffer, byteOffset, length);
  }
}

const HOST_CLASS: Readonly<Record<DType, string>> = { f32: 'Float32Array', i32: 'Int32Array', u32: 'Uint32Array', f16: 'Uint16Array' };

/** Throws (naming field and sample) unless `value` is a well-formed row. */
export function checkRow(value: unknown, where: string): RowValue {
  if (value instanceof Tensor) return value;
  if (value === null || typeof value !== 'object')
    throw new DataPlaneError('invalid_argument', `${where} must be a HostTensor {dtype, shape, data} or a GPU Tensor`);
  const v = value as Partial<HostTensor>;
  if (!isDType(v.dtype))
    throw new DataPlaneError('invalid_argument', `${where}.dtype must be one of ${DTYPES.join(', ')}, got ${JSON.stringify(v.dtype)}`);
  if (!Array.isArray(v.shape)) throw new DataPlaneError('invalid_argument', `${where}.shape must be an array of dimensions`);
  let numel: number;
  try {
    numel = numelOf(v.shape);
  } catch (err) {
    throw new DataPlaneError('invalid_argument', `${where}.shape: ${(err as Error).message}`);
  }
  const expected = HOST_CLASS[v.dtype];
  if (!ArrayBuffer.isView(v.data) || v.data.constructor.name !== expected) {
    throw new DataPlaneError('invalid_argument', `${where}.data must be a ${expected} for dtype ${v.dtype}`);
  }
  if ((v.data as HostData).length !== numel) {
    throw new DataPlaneError(
      'invalid_argument',
      `${where}: shape [${v.shape.join(', ')}] has ${numel} elements but data has ${(v.data as HostData).length}`,
    );
  }
  return value as HostTensor;
}

/** A host copy of any row (GPU rows are read back, which needs the Gpu that owns them). */
export async function toHostRow(value: RowValue, gpu: Gpu | undefined, where: string): Promise<HostTensor> {
  if (!isTensor(value)) return { dtype: value.dtype, shape: [...value.shape], data: value.data.slice() };
  if (!gpu) throw new DataPlaneError('invalid_argument', `${where} is a GPU Tensor but this data plane has no Gpu to read it back with`);
  const data = await gpu.readOnce(value);
  return { dtype: value.dtype, shape: [...value.shape], data };
}

/** Typed-array cells: each put copies, each read copies (callers can never alias stored bytes). */
export class HostColumnStore implements ColumnStore {
  readonly residency = 'host';
  private readonly cells = new Map<string, HostTensor>();
  private held = 0;
  constructor(private readonly gpu?: Gpu) {}

  async prepare(value: RowValue, label: string): Promise<RowValue> {
    return toHostRow(value, this.gpu, label);
  }
  install(cell: string, prepared: RowValue): void {
    this.free(cell);
    const row = prepared as HostTensor;
    this.cells.set(cell, row);
    this.held += row.data.byteLength;
  }
  read(cell: string): RowValue | undefined {
    const row = this.cells.get(cell);
    return row && { dtype: row.dtype, shape: [...row.shape], data: row.data.slice() };
  }
  free(cell: string): void {
    const row = this.cells.get(cell);
    if (!row) return;
    this.cells.delete(cell);
    this.held -= row.data.byteLength;
  }
  discard(): void {
    // Prepared host copies are plain garbage-collected arrays.
  }
  get bytesHeld(): number {
    return this.held;
  }
  close(): void {
    this.cells.clear();
    this.held = 0;
  }
}

/**
 * GPU cells: host rows are uploaded, GPU rows are copied buffer-to-buffer, reads lend the stored
 * tensor (valid until the sample is cleared; do not release it), and freeing returns the buffers
 * to the pool — before the id can be put again, since clear and re-put are separate steps.
 */
export class GpuColumnStore implements ColumnStore {
  readonly residency = 'gpu';
  private readonly cells = new Map<string, Tensor>();
  private held = 0;
  constructor(private readonly gpu: Gpu) {}

  async prepare(value: RowValue, label: string): Promise<RowValue> {
    if (!isTensor(value)) return this.gpu.upload(value.shape, value.dtype, value.data, label);
    const copy = this.gpu.tensor(value.shape, value.dtype, label);
    if (copy.parts.length !== value.parts.length) {
      this.gpu.release(copy);
      throw new DataPlaneError(
        'invalid_argument',
        `${label}: source tensor is split into ${value.parts.length} parts, the store's copy into ${copy.parts.length}; was it made by another Gpu?`,
      );
    }
    const rowBytes = value.rowElements * BYTES_PER_ELEMENT[value.dtype];
    value.parts.forEach((p, k) => {
      const bytes = Math.ceil((p.rowCount * rowBytes) / 4) * 4;
      if (bytes > 0) this.gpu.batcher.copyBuffer(p.buffer, p.byteOffset, copy.parts[k].buffer, copy.parts[k].byteOffset, bytes);
    });
    return copy;
  }
  install(cell: string, prepared: RowValue): void {
    this.free(cell);
    const t = prepared as Tensor;
    this.cells.set(cell, t);
    this.held += t.byteLength;
  }
  read(cell: string): RowValue | undefined {
    return this.cells.get(cell);
  }
  free(cell: string): void {
    const t = this.cells.get(cell);
    if (!t) return;
    this.cells.delete(cell);
    this.held -= t.byteLength;
    this.gpu.release(t);
  }
  discard(prepared: RowValue): void {
    if (isTensor(prepared)) this.gpu.release(prepared);
  }
  get bytesHeld(): number {
    return this.held;
  }
  close(): void {
    for (const cell of [...this.cells.keys()]) this.free(cell);
  }
}

/**
 * The noop adapter's store: keeps the caller's row objects by reference (an in-process passthrough,
 * zero copies). The caller must not mutate or release a row it put until the sample is cleared.
 */
export class PassthroughColumnStore implements ColumnStore {
  readonly residency = 'caller';
  private readonly cells = new Map<string, RowValue>();
  private held = 0;

  async prepare(value: RowValue): Promise<RowValue> {
    return value;
  }
  install(cell: string, prepared: RowValue): void {
    this.free(cell);
    this.cells.set(cell, prepared);
    this.held += rowBytes(prepared);
  }
  read(cell: string): RowValue | undefined {
    return this.cells.get(cell);
  }
  free(cell: string): void {
    const row = this.cells.get(cell);
    if (!row) return;
    this.cells.delete(cell);
    this.held -= rowBytes(row);
  }
  discard(): void {
    // Nothing was copied.
  }
  get bytesHeld(): number {
    return this.held;
  }
  close(): void {
    this.cells.clear();
    this.held = 0;
  }
}
