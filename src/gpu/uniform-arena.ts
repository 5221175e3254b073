/**
 * One uniform buffer per submit: every dispatch of a batch gets a 256-byte slot, written to the CPU
 * mirror while encoding and uploaded with a single writeBuffer just before the submit. Kernels bind
 * the arena with a dynamic offset, so their bind groups are independent of the slot.
 *
 * Reusing the same GPU buffer for the next batch is safe: queue operations execute in order, so the
 * next writeBuffer lands after the previous submit has consumed its slots.
 */

export const UNIFORM_SLOT_BYTES = 256;

export class UniformArena {
  readonly buffer: GPUBuffer;
  private readonly mirror: ArrayBuffer;
  private used = 0;

  constructor(
    private readonly device: GPUDevice,
    readonly slots = 512,
  ) {
    this.buffer = device.createBuffer({
      label: 'uniform-arena',
      size: slots * UNIFORM_SLOT_BYTES,
      usage: 0x40 /* UNIFORM */ | 0x08 /* COPY_DST */,
    });
    this.mirror = new ArrayBuffer(slots * UNIFORM_SLOT_BYTES);
  }

  get isFull(): boolean {
    return this.used >= this.slots;
  }

  get slotsUsed(): number {
    return this.used;
  }

  /** Copy `data` (≤ 256 bytes) into the next slot; returns its byte offset. */
  push(data: ArrayBufferView): number {
    if (data.byteLength > UNIFORM_SLOT_BYTES)
      throw new Error(`uniform block of ${data.byteLength} bytes exceeds the ${UNIFORM_SLOT_BYTES}-byte slot`);
    if (this.isFull) throw new Error('uniform arena full: flush the batch first');
    const offset = this.used * UNIFORM_SLOT_BYTES;
    new Uint8Array(this.mirror, offset, data.byteLength).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    this.used++;
    return offset;
  }

  /** Upload the used slots (call right before submit) and start a new batch. */
  upload(queue: GPUQueue): void {
    if (this.used > 0) queue.writeBuffer(this.buffer, 0, this.mirror, 0, this.used * UNIFORM_SLOT_BYTES);
    this.used = 0;
  }

  destroy(): void {
    this.buffer.destroy();
  }
}

/** Little helper to build a uniform block of u32/i32/f32 fields in declaration order. */
export class UniformWriter {
  private readonly view: DataView;
  private readonly bytes = new ArrayBuffer(UNIFORM_SLOT_BYTES);
  private offset = 0;
  constructor() {
    this.view = new DataView(this.bytes);
  }
  u32(v: number): this {
    this.view.setUint32(this.offset, v >>> 0, true);
    this.offset += 4;
    return this;
  }
  i32(v: number): this {
    this.view.setInt32(this.offset, v | 0, true);
    this.offset += 4;
    return this;
  }
  f32(v: number): this {
    this.view.setFloat32(this.offset, v, true);
    this.offset += 4;
    return this;
  }
  /** A WGSL array<vec4<f32>, length / 4> at the next 16-byte boundary: `values`, then zeros up to `length`. */
  f32Array(values: readonly number[], length: number): this {
    if (length % 4 !== 0 || values.length > length)
      throw new Error(`UniformWriter.f32Array: ${values.length} values do not fit an array of ${length} (a multiple of 4)`);
    this.offset = Math.ceil(this.offset / 16) * 16;
    for (let i = 0; i < length; i++) this.f32(values[i] ?? 0);
    return this;
  }
  /** The block, padded to 16 bytes (WGSL uniform struct alignment). */
  finish(): Uint8Array {
    return new Uint8Array(this.bytes, 0, Math.max(16, Math.ceil(this.offset / 16) * 16));
  }
}
