/**
 * Minimal safetensors reader/writer (the target-model issue hardens the reader against hostile files).
 *
 * Layout: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets:
 * [begin, end]}, "__metadata__"?: {...}}, then the data section; offsets are relative to it.
 */

export type SafetensorsDType = 'F64' | 'F32' | 'F16' | 'BF16' | 'I64' | 'I32' | 'I16' | 'I8' | 'U8' | 'BOOL';

export const SAFETENSORS_DTYPE_BYTES: Readonly<Record<SafetensorsDType, number>> = {
  F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1,
};

export interface SafetensorsEntry {
  readonly name: string;
  readonly dtype: SafetensorsDType;
  readonly shape: readonly number[];
  /** Absolute byte range in the file. */
  readonly begin: number;
  readonly end: number;
}

export interface SafetensorsHeader {
  readonly entries: ReadonlyMap<string, SafetensorsEntry>;
  readonly metadata: Readonly<Record<string, string>>;
  readonly dataStart: number;
}

export function parseSafetensorsHeader(bytes: Uint8Array, source = 'safetensors'): SafetensorsHeader {
  if (bytes.length < 8) throw new Error(`${source}: file is ${bytes.length} bytes, too short for a safetensors header`);
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  if (8 + n > bytes.length) throw new Error(`${source}: header length ${n} runs past the end of the file`);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  } catch (err) {
    throw new Error(`${source}: header is not valid JSON (${(err as Error).message})`, { cause: err });
  }
  const entries = new Map<string, SafetensorsEntry>();
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(json)) {
    if (name === '__metadata__') {
      metadata = value as Record<string, string>;
      continue;
    }
    const v = value as { dtype: SafetensorsDType; shape: number[]; data_offsets: [number, number] };
    if (!(v.dtype in SAFETENSORS_DTYPE_BYTES)) throw new Error(`${source}: tensor ${name} has unsupported dtype ${v.dtype}`);
    const [b, e] = v.data_offsets;
    const numel = v.shape.reduce((a, d) => a * d, 1);
    if (e - b !== numel * SAFETENSORS_DTYPE_BYTES[v.dtype]) {
      throw new Error(`${source}: tensor ${name} ${v.dtype}[${v.shape}] needs ${numel * SAFETENSORS_DTYPE_BYTES[v.dtype]} bytes, offsets give ${e - b}`);
    }
    if (8 + n + e > bytes.length) throw new Error(`${source}: tensor ${name} ends past the end of the file`);
    entries.set(name, { name, dtype: v.dtype, shape: v.shape, begin: 8 + n + b, end: 8 + n + e });
  }
  return { entries, metadata, dataStart: 8 + n };
}

/** A whole safetensors file in memory, with typed accessors. */
export class SafetensorsFile {
  readonly header: SafetensorsHeader;
  constructor(readonly bytes: Uint8Array, readonly source = 'safetensors') {
    this.header = parseSafetensorsHeader(bytes, source);
  }

  get names(): string[] {
    return [...this.header.entries.keys()];
  }

  has(name: string): boolean {
    return this.header.entries.has(name);
  }

  entry(name: string): SafetensorsEntry {
    const e = this.header.entries.get(name);
    if (!e) throw new Error(`${this.source}: no tensor named "${name}"`);
    return e;
  }

  shape(name: string): readonly number[] {
    return this.entry(name).shape;
  }

  /** Raw bytes of one tensor (a copy, aligned). */
  raw(name: string): Uint8Array {
    const e = this.entry(name);
    return this.bytes.slice(e.begin, e.end);
  }

  /** Any float dtype widened to Float32Array. */
  f32(name: string): Float32Array {
    const e = this.entry(name);
    const raw = this.raw(name);
    switch (e.dtype) {
      case 'F32':
        return new Float32Array(raw.buffer);
      case 'F64':
        return Float32Array.from(new Float64Array(raw.buffer));
      case 'F16':
        return Float32Array.from(new Uint16Array(raw.buffer), f16ToF32);
      case 'BF16':
        return Float32Array.from(new Uint16Array(raw.buffer), bf16ToF32);
      default:
        throw new Error(`${this.source}: tensor ${name} is ${e.dtype}, not a float tensor`);
    }
  }

  /** Any integer or bool dtype as Int32Array (I64 values must fit in i32). */
  i32(name: string): Int32Array {
    const e = this.entry(name);
    const raw = this.raw(name);
    switch (e.dtype) {
      case 'I32':
        return new Int32Array(raw.buffer);
      case 'I64': {
        const wide = new BigInt64Array(raw.buffer);
        const out = new Int32Array(wide.length);
        for (let i = 0; i < wide.length; i++) {
          const v = Number(wide[i]);
          if (!Number.isSafeInteger(v) || v > 2147483647 || v < -2147483648) throw new Error(`${this.source}: ${name}[${i}] = ${wide[i]} does not fit in i32`);
          out[i] = v;
        }
        return out;
      }
      case 'I16':
        return Int32Array.from(new Int16Array(raw.buffer));
      case 'I8':
        return Int32Array.from(new Int8Array(raw.buffer));
      case 'U8':
      case 'BOOL':
        return Int32Array.from(raw);
      default:
        throw new Error(`${this.source}: tensor ${name} is ${e.dtype}, not an integer tensor`);
    }
  }
}

export function bf16ToF32(bits: number): number {
  const buf = new DataView(new ArrayBuffer(4));
  buf.setUint32(0, (bits & 0xffff) << 16, true);
  return buf.getFloat32(0, true);
}

/** Round-to-nearest-even f32 → bf16 bits. */
export function f32ToBf16(value: number): number {
  const buf = new DataView(new ArrayBuffer(4));
  buf.setFloat32(0, value, true);
  const bits = buf.getUint32(0, true);
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return 0x7fc0; // NaN
  const rounding = 0x7fff + ((bits >>> 16) & 1);
  return ((bits + rounding) >>> 16) & 0xffff;
}

export function f16ToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const frac = bits & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 31) return frac ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

export interface TensorToWrite {
  dtype: SafetensorsDType;
  shape: readonly number[];
  data: Uint8Array;
}

/** Serialise tensors (in the given order) to safetensors bytes. */
export function writeSafetensors(tensors: Readonly<Record<string, TensorToWrite>>, metadata?: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const numel = t.shape.reduce((a, d) => a * d, 1);
    if (t.data.byteLength !== numel * SAFETENSORS_DTYPE_BYTES[t.dtype]) {
      throw new Error(`writeSafetensors: ${name} ${t.dtype}[${t.shape}] needs ${numel * SAFETENSORS_DTYPE_BYTES[t.dtype]} bytes, got ${t.data.byteLength}`);
    }
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8 !== 0) json += ' ';
  const headerBytes = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + headerBytes.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let p = 8 + headerBytes.length;
  for (const t of Object.values(tensors)) {
    out.set(t.data, p);
    p += t.data.byteLength;
  }
  return out;
}
