/**
 * Gpu: the GPU core every plane uses. One per GpuContext; it owns the buffer pool, the pipeline
 * cache, the command batcher with its uniform arena, the staging ring and the timer, and it makes
 * and moves tensors.
 */
import { BufferPool, MemoryCounter, STORAGE_USAGE, type MemoryStats } from './buffer-pool.ts';
import { CommandBatcher } from './command-batcher.ts';
import type { GpuContext } from './context.ts';
import { PipelineCache } from './pipeline-cache.ts';
import { StagingRing } from './staging-ring.ts';
import { BYTES_PER_ELEMENT, fmtShape, numelOf, partOverlaps, planTensorLayout, Tensor, type DType, type TensorPart } from './tensor.ts';
import { GpuTimer } from './timer.ts';

export type HostArray = Float32Array | Int32Array | Uint32Array | Uint16Array;

/** A one-off readback (Gpu.readOnce) goes through staging this many bytes at a time (a multiple of 4). */
export const READBACK_SLICE_BYTES = 64 * 1024 * 1024;

export function hostArrayFor(dtype: DType, buffer: ArrayBuffer): HostArray {
  switch (dtype) {
    case 'f32':
      return new Float32Array(buffer);
    case 'i32':
      return new Int32Array(buffer);
    case 'u32':
      return new Uint32Array(buffer);
    case 'f16':
      return new Uint16Array(buffer);
  }
}

export class Gpu {
  readonly pool: BufferPool;
  readonly pipelines: PipelineCache;
  readonly batcher: CommandBatcher;
  readonly staging: StagingRing;
  readonly timer: GpuTimer;
  private readonly memory = new MemoryCounter();

  constructor(
    readonly ctx: GpuContext,
    options: { maxDispatchesPerSubmit?: number; idleSubmitDispatches?: number } = {},
  ) {
    this.pool = new BufferPool(ctx.device, this.memory);
    this.pipelines = new PipelineCache(ctx);
    // Unset options take the batcher's defaults.
    this.batcher = new CommandBatcher(ctx, this.pipelines, options.maxDispatchesPerSubmit, options.idleSubmitDispatches);
    this.staging = new StagingRing(ctx.device, this.batcher, this.memory);
    this.timer = new GpuTimer(ctx, this.batcher);
    // The arena and timer buffers are fixed-size and live as long as this Gpu.
    this.memory.created(this.batcher.uniformBytes + this.timer.bufferBytes);
  }

  /**
   * Bytes of every GPU buffer this Gpu holds now (tensors, pooled free buffers, staging, uniforms,
   * timer) and the peak since creation or the last `resetMemoryPeak()`.
   */
  memoryStats(): MemoryStats {
    return this.memory.stats();
  }

  /** Start a new peak window at the bytes live now. */
  resetMemoryPeak(): void {
    this.memory.resetPeak();
  }

  get device(): GPUDevice {
    return this.ctx.device;
  }

  /** Bytes one binding may hold (the device limit, or a lower planning limit set for tests). */
  get maxBindingBytes(): number {
    return Math.min(this.ctx.limits.maxStorageBufferBindingSize, this.ctx.limits.maxBufferSize ?? Infinity);
  }

  /** Allocate an uninitialised tensor; split into row parts when it exceeds one binding (planTensorLayout). */
  tensor(shape: readonly number[], dtype: DType = 'f32', label = 'tensor'): Tensor {
    const { splitDims, counts } = planTensorLayout(shape, dtype, this.maxBindingBytes);
    const rowBytes = (shape.length === 0 ? 1 : numelOf(shape.slice(splitDims))) * BYTES_PER_ELEMENT[dtype];
    const parts: TensorPart[] = [];
    let rowStart = 0;
    for (const rowCount of counts) {
      // Bindings must be a multiple of 4 bytes (f16 tensors with an odd element count).
      const byteLength = Math.max(4, Math.ceil((rowCount * rowBytes) / 4) * 4);
      const buffer = this.pool.acquire(byteLength, STORAGE_USAGE, label);
      parts.push({ buffer, byteOffset: 0, byteLength, rowStart, rowCount });
      rowStart += rowCount;
    }
    return new Tensor(shape, dtype, parts, label, splitDims);
  }

  /** Allocate a tensor and fill it with `data` (length must equal the element count). */
  upload(shape: readonly number[], dtype: DType, data: ArrayLike<number>, label = 'tensor'): Tensor {
    const t = this.tensor(shape, dtype, label);
    this.write(t, data);
    return t;
  }

  zeros(shape: readonly number[], dtype: DType = 'f32', label = 'zeros'): Tensor {
    const t = this.tensor(shape, dtype, label);
    for (const p of t.parts) this.batcher.clearBuffer(p.buffer, p.byteOffset, p.byteLength);
    return t;
  }

  write(tensor: Tensor, data: ArrayLike<number>): void {
    if (data.length !== tensor.numel) {
      throw new Error(`write to ${tensor.label} ${fmtShape(tensor.shape)}: got ${data.length} values, need ${tensor.numel}`);
    }
    const host = toHost(tensor.dtype, data);
    const rowElements = tensor.rowElements;
    // Writes go through the queue, which orders them after already-submitted work; flush first so
    // they also come after work still sitting in the batch.
    this.batcher.flush();
    for (const p of tensor.parts) {
      const start = p.rowStart * rowElements;
      const count = p.rowCount * rowElements;
      const bytes = new Uint8Array(
        host.buffer as ArrayBuffer,
        host.byteOffset + start * host.BYTES_PER_ELEMENT,
        count * host.BYTES_PER_ELEMENT,
      );
      if (bytes.byteLength % 4 === 0) {
        this.device.queue.writeBuffer(p.buffer, p.byteOffset, bytes);
      } else {
        const padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
        padded.set(bytes);
        this.device.queue.writeBuffer(p.buffer, p.byteOffset, padded);
      }
    }
  }

  /**
   * Write rows [rowStart, rowStart + n) of `tensor` from `data` (n whole rows), into whichever parts
   * hold them. A large tensor is filled slice by slice this way, so the host never holds it whole.
   * Queue writes move 4-byte multiples: rows must be too, unless the slice covers the whole tensor.
   */
  writeRows(tensor: Tensor, rowStart: number, data: ArrayLike<number>): void {
    const rowElements = tensor.rowElements;
    const rows = tensor.rows;
    const n = data.length / rowElements;
    if (!Number.isInteger(n) || !Number.isInteger(rowStart) || rowStart < 0 || rowStart + n > rows)
      throw new Error(
        `writeRows to ${tensor.label} ${fmtShape(tensor.shape)}: ${data.length} values at row ${rowStart} are not whole rows inside its ${rows}`,
      );
    if (rowStart === 0 && n === rows) return this.write(tensor, data);
    const elementBytes = BYTES_PER_ELEMENT[tensor.dtype];
    if ((rowElements * elementBytes) % 4 !== 0)
      throw new Error(`writeRows to ${tensor.label}: rows of ${rowElements * elementBytes} bytes can only be written whole`);
    const host = toHost(tensor.dtype, data);
    this.batcher.flush(); // after work still in the batch, as in write()
    for (const p of tensor.parts) {
      const from = Math.max(rowStart, p.rowStart);
      const to = Math.min(rowStart + n, p.rowStart + p.rowCount);
      if (from >= to) continue;
      const bytes = new Uint8Array(
        host.buffer as ArrayBuffer,
        host.byteOffset + (from - rowStart) * rowElements * elementBytes,
        (to - from) * rowElements * elementBytes,
      );
      this.device.queue.writeBuffer(p.buffer, p.byteOffset + (from - p.rowStart) * rowElements * elementBytes, bytes);
    }
  }

  /**
   * Start reading `tensor` back without waiting: the copy joins the current batch and the promise
   * resolves after a later submit. Use in hot loops (read losses with one step of lag).
   */
  readLater(tensor: Tensor): Promise<HostArray> {
    const rowBytes = tensor.rowElements * BYTES_PER_ELEMENT[tensor.dtype];
    const reads = tensor.parts.map((p) => this.staging.enqueue(p.buffer, p.byteOffset, p.rowCount * rowBytes));
    return Promise.all(reads).then((chunks) => {
      const out = new Uint8Array(tensor.byteLength);
      let offset = 0;
      for (const c of chunks) {
        out.set(new Uint8Array(c), offset);
        offset += c.byteLength;
      }
      return hostArrayFor(tensor.dtype, out.buffer);
    });
  }

  /** Read a tensor now (submits the batch). For tests, metrics and the end of a run. */
  async read(tensor: Tensor): Promise<HostArray> {
    const pending = this.readLater(tensor);
    this.batcher.flush();
    return pending;
  }

  /**
   * Read a large tensor once (a spill, a checkpoint, a sample sent away): `sliceBytes` (default
   * `READBACK_SLICE_BYTES`) at a time through one staging buffer, destroyed after each slice, so a one-off readback holds at most
   * one slice of staging, whatever the tensor's size (the memory plan counts that much).
   */
  async readOnce(tensor: Tensor, sliceBytes = READBACK_SLICE_BYTES): Promise<HostArray> {
    if (!Number.isInteger(sliceBytes) || sliceBytes < 4 || sliceBytes % 4 !== 0)
      throw new Error(`Gpu.readOnce: sliceBytes must be a positive multiple of 4, got ${sliceBytes}`);
    const rowBytes = tensor.rowElements * BYTES_PER_ELEMENT[tensor.dtype];
    const out = new Uint8Array(tensor.byteLength);
    let at = 0;
    for (const part of tensor.parts) {
      const bytes = part.rowCount * rowBytes;
      for (let offset = 0; offset < bytes; offset += sliceBytes) {
        const n = Math.min(sliceBytes, bytes - offset);
        const pending = this.staging.enqueue(part.buffer, part.byteOffset + offset, n);
        this.batcher.flush();
        try {
          out.set(new Uint8Array(await pending, 0, n), at);
        } finally {
          this.staging.trim();
        }
        at += n;
      }
    }
    return hostArrayFor(tensor.dtype, out.buffer);
  }

  /** A new tensor with the same shape, dtype and contents (a GPU copy, encoded into the batch). */
  clone(tensor: Tensor, label = `${tensor.label}-clone`): Tensor {
    const out = this.tensor(tensor.shape, tensor.dtype, label);
    this.copyInto(tensor, out);
    return out;
  }

  /**
   * Copy all of `src` into `dst` starting at byte `dstByteOffset` of `dst` (same dtype); either may
   * be split into parts, one buffer copy per overlap. GPU copies move 4-byte multiples.
   */
  copyInto(src: Tensor, dst: Tensor, dstByteOffset = 0): void {
    if (src.dtype !== dst.dtype) throw new Error(`copyInto ${dst.label}: ${src.label} is ${src.dtype}, ${dst.label} is ${dst.dtype}`);
    if (dstByteOffset + src.byteLength > dst.byteLength) {
      throw new Error(
        `copyInto ${dst.label}: ${src.byteLength} bytes of ${src.label} at offset ${dstByteOffset} overflow ${dst.byteLength} bytes`,
      );
    }
    const overlaps = partOverlaps(src, 0, dst, dstByteOffset / BYTES_PER_ELEMENT[dst.dtype], src.numel);
    if (overlaps.some((o) => o.srcByte % 4 !== 0 || o.dstByte % 4 !== 0 || o.bytes % 4 !== 0)) {
      throw new Error(
        `copyInto ${dst.label}: GPU copies move 4-byte multiples; ${src.label} ${fmtShape(src.shape)} ${src.dtype} at byte ${dstByteOffset} does not`,
      );
    }
    for (const o of overlaps) this.batcher.copyBuffer(o.src.buffer, o.srcByte, o.dst.buffer, o.dstByte, o.bytes);
  }

  /**
   * Destroy the pool's and the staging ring's free buffers (work already encoded is submitted first, so nothing in flight
   * loses a buffer). Called where a phase of varying shapes ends (a capture, a generation, an
   * evaluation): each row count leaves buffers of its own size classes in the pool, which the next
   * phase cannot reuse, and the memory plan counts one working set per phase, not one per shape.
   * A training step ends with it too (its next batch may have another padded length). Returns the bytes freed.
   */
  trimPool(): number {
    this.batcher.flush();
    return this.pool.trim() + this.staging.trim();
  }

  release(...tensors: Tensor[]): void {
    for (const t of tensors) for (const p of t.parts) this.pool.release(p.buffer);
  }

  /**
   * Release tensors and destroy their buffers now (BufferPool.discard) instead of pooling them. Work
   * already encoded is submitted first, and a buffer destroyed after submission lives until that work
   * is done, so encoded readers still read it.
   */
  discard(...tensors: Tensor[]): void {
    this.batcher.flush();
    for (const t of tensors) for (const p of t.parts) this.pool.discard(p.buffer);
  }

  /** Submit and wait for the GPU; throws the first typed error of any submitted batch. */
  async sync(): Promise<void> {
    await this.batcher.finish();
  }

  /**
   * Submit pending work, then free every resource once in-flight reads have settled (a staging
   * buffer destroyed under a pending map would fail a read someone may still await).
   */
  destroy(): void {
    this.batcher.destroy();
    // Its bind groups' native memory returns only once they are collected: let go of them now,
    // even if this object stays referenced (src/platform/dawn-bind-group-reclaim.ts).
    this.pipelines.clearBindGroups();
    const free = () => {
      this.staging.destroy();
      this.timer.destroy();
      this.memory.destroyed(this.batcher.uniformBytes + this.timer.bufferBytes);
      this.pool.destroy();
    };
    if (this.staging.pendingReads === 0) free();
    else void this.staging.drain().then(free);
  }
}

function toHost(dtype: DType, data: ArrayLike<number>): HostArray {
  switch (dtype) {
    case 'f32':
      return data instanceof Float32Array ? data : Float32Array.from(data);
    case 'i32':
      return data instanceof Int32Array ? data : Int32Array.from(data);
    case 'u32':
      return data instanceof Uint32Array ? data : Uint32Array.from(data);
    case 'f16':
      return data instanceof Uint16Array ? data : Uint16Array.from(data);
  }
}
