/**
 * Safetensors reader/writer, hardened against hostile or damaged files.
 *
 * Layout: u64 little-endian header length N, N bytes of UTF-8 JSON {name: {dtype, shape,
 * data_offsets: [begin, end]}, "__metadata__"?: {string: string}}, then the data section; offsets
 * are relative to it. Like the format's reference implementation we require the tensors to tile
 * the data section exactly (no overlaps, no holes, nothing after the last tensor), so a file whose
 * header was edited or whose data was cut short is refused before any tensor is decoded.
 *
 * Two readers share one validator: `SafetensorsFile` over bytes already in memory, and
 * `SafetensorsReader` over a FileStore, which reads the 8-byte prefix, then the header, then one
 * tensor at a time with `readRange`, so a multi-GB checkpoint is never held whole.
 */
import type { FileStore } from '../ports/storage.ts';
import { bf16BitsToF16, checkF16Finite, f32BitsToF16, f32ToF16Bits } from './f16-bits.ts';

export type SafetensorsDType = 'F64' | 'F32' | 'F16' | 'BF16' | 'I64' | 'I32' | 'I16' | 'I8' | 'U8' | 'BOOL';

export const SAFETENSORS_DTYPE_BYTES: Readonly<Record<SafetensorsDType, number>> = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U8: 1,
  BOOL: 1,
};

/** Headers of real checkpoints are a few hundred KB; anything this large is damage or an attack. */
export const MAX_SAFETENSORS_HEADER_BYTES = 100 * 1024 * 1024;

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

export const isDType = (v: unknown): v is SafetensorsDType => typeof v === 'string' && Object.hasOwn(SAFETENSORS_DTYPE_BYTES, v);
const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
export const isDim = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** Reads the u64 header length from the first 8 bytes and checks it against the file size. */
export function readHeaderLength(prefix: Uint8Array, fileSize: number, source: string): number {
  if (prefix.length < 8 || fileSize < 8) throw new Error(`${source}: file is ${fileSize} bytes, too short for a safetensors header`);
  const n = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_SAFETENSORS_HEADER_BYTES))
    throw new Error(`${source}: header length ${n} exceeds the ${MAX_SAFETENSORS_HEADER_BYTES}-byte limit`);
  if (8n + n > BigInt(fileSize)) throw new Error(`${source}: header length ${n} runs past the end of the ${fileSize}-byte file`);
  return Number(n);
}

/**
 * Validates the JSON header (the N bytes after the prefix) of a file of `fileSize` bytes and returns
 * entries with absolute offsets. Every failure names the source and, where one is involved, the tensor.
 */
export function parseHeaderJson(headerBytes: Uint8Array, fileSize: number, source: string): SafetensorsHeader {
  const dataStart = 8 + headerBytes.length;
  const dataSize = fileSize - dataStart;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(headerBytes);
  } catch (err) {
    throw new Error(`${source}: header is not valid UTF-8`, { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: header is not valid JSON (${(err as Error).message})`, { cause: err });
  }
  if (!isPlainObject(json))
    throw new Error(
      `${source}: header must be a JSON object, got ${json === null ? 'null' : Array.isArray(json) ? 'an array' : typeof json}`,
    );

  const entries = new Map<string, SafetensorsEntry>();
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(json)) {
    if (name === '__metadata__') {
      if (!isPlainObject(value)) throw new Error(`${source}: __metadata__ must be an object of strings`);
      for (const [k, v] of Object.entries(value)) {
        if (typeof v !== 'string') throw new Error(`${source}: __metadata__.${k} must be a string, got ${typeof v}`);
      }
      metadata = value as Record<string, string>;
      continue;
    }
    const where = `${source}: tensor "${name}"`;
    if (!isPlainObject(value)) throw new Error(`${where}: entry must be an object with dtype, shape and data_offsets`);
    const { dtype, shape, data_offsets: offsets } = value;
    if (!isDType(dtype)) throw new Error(`${where}: unsupported dtype ${JSON.stringify(dtype)}`);
    if (!Array.isArray(shape) || !shape.every(isDim)) {
      throw new Error(`${where}: shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`);
    }
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isDim)) {
      throw new Error(`${where}: data_offsets must be two non-negative integers, got ${JSON.stringify(offsets)}`);
    }
    const [begin, end] = offsets as [number, number];
    if (begin > end) throw new Error(`${where}: data_offsets [${begin}, ${end}] are reversed`);
    if (end > dataSize) throw new Error(`${where}: data_offsets [${begin}, ${end}] run past the ${dataSize}-byte data section`);
    let bytes = SAFETENSORS_DTYPE_BYTES[dtype];
    for (const d of shape) bytes *= d;
    if (!Number.isSafeInteger(bytes) || bytes !== end - begin) {
      throw new Error(`${where}: ${dtype}[${shape.join(', ')}] needs ${bytes} bytes, data_offsets give ${end - begin}`);
    }
    entries.set(name, { name, dtype, shape: [...shape], begin: dataStart + begin, end: dataStart + end });
  }

  // The tensors must tile the data section: sort by range and walk it.
  const sorted = [...entries.values()].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let cursor = dataStart;
  for (const e of sorted) {
    if (e.begin < cursor)
      throw new Error(
        `${source}: tensor "${e.name}" overlaps the tensor before it (starts at data offset ${e.begin - dataStart}, previous ends at ${cursor - dataStart})`,
      );
    if (e.begin > cursor)
      throw new Error(
        `${source}: tensor "${e.name}" leaves a hole in the data section (starts at data offset ${e.begin - dataStart}, previous ends at ${cursor - dataStart})`,
      );
    cursor = e.end;
  }
  if (cursor !== fileSize) throw new Error(`${source}: ${fileSize - cursor} bytes after the last tensor are not described by the header`);
  return { entries, metadata, dataStart };
}

export function parseSafetensorsHeader(bytes: Uint8Array, source = 'safetensors'): SafetensorsHeader {
  const n = readHeaderLength(bytes, bytes.length, source);
  return parseHeaderJson(bytes.subarray(8, 8 + n), bytes.length, source);
}

/** View raw little-endian bytes as T, copying only when the bytes are not aligned for it. */
function view<T>(raw: Uint8Array, width: number, make: (buf: ArrayBuffer, offset: number, length: number) => T): T {
  const aligned = raw.byteOffset % width === 0 ? raw : raw.slice();
  return make(aligned.buffer as ArrayBuffer, aligned.byteOffset, aligned.byteLength / width);
}

/** Any float dtype widened to Float32Array. For aligned F32 input the result is a view of `raw`. */
export function decodeF32(entry: SafetensorsEntry, raw: Uint8Array, source: string): Float32Array {
  switch (entry.dtype) {
    case 'F32':
      return view(raw, 4, (b, o, n) => new Float32Array(b, o, n));
    case 'F64':
      return Float32Array.from(view(raw, 8, (b, o, n) => new Float64Array(b, o, n)));
    case 'F16':
      return Float32Array.from(
        view(raw, 2, (b, o, n) => new Uint16Array(b, o, n)),
        f16ToF32,
      );
    case 'BF16': {
      // bf16 is the top half of an f32: shift the bits into place rather than going through DataView.
      const halves = view(raw, 2, (b, o, n) => new Uint16Array(b, o, n));
      const bits = new Uint32Array(halves.length);
      for (let i = 0; i < halves.length; i++) bits[i] = halves[i] << 16;
      return new Float32Array(bits.buffer);
    }
    default:
      throw new Error(`${source}: tensor "${entry.name}" is ${entry.dtype}, not a float tensor`);
  }
}

/**
 * A float tensor as IEEE binary16 bits, for f16 storage on the GPU without an f32 copy: F16 is a
 * view of its raw bits (checked finite), BF16 and F32 are converted bits to bits rounding to
 * nearest even (f16-bits.ts), F64 through f32. Non-finite values and finite ones beyond ±65504 are
 * refused, naming the tensor.
 */
export function decodeF16Bits(entry: SafetensorsEntry, raw: Uint8Array, source: string): Uint16Array {
  const what = `${source}: tensor "${entry.name}"`;
  switch (entry.dtype) {
    case 'F16':
      return checkF16Finite(
        view(raw, 2, (b, o, n) => new Uint16Array(b, o, n)),
        what,
      );
    case 'BF16':
      return bf16BitsToF16(
        view(raw, 2, (b, o, n) => new Uint16Array(b, o, n)),
        what,
      );
    case 'F32':
      return f32BitsToF16(
        view(raw, 4, (b, o, n) => new Uint32Array(b, o, n)),
        what,
      );
    case 'F64':
      return f32ToF16Bits(Float32Array.from(view(raw, 8, (b, o, n) => new Float64Array(b, o, n))), what);
    default:
      throw new Error(`${what} is ${entry.dtype}, not a float tensor`);
  }
}

/** Any integer or bool dtype as Int32Array (I64 values must fit in i32). For aligned I32 input, a view of `raw`. */
export function decodeI32(entry: SafetensorsEntry, raw: Uint8Array, source: string): Int32Array {
  switch (entry.dtype) {
    case 'I32':
      return view(raw, 4, (b, o, n) => new Int32Array(b, o, n));
    case 'I64': {
      const wide = view(raw, 8, (b, o, n) => new BigInt64Array(b, o, n));
      const out = new Int32Array(wide.length);
      for (let i = 0; i < wide.length; i++) {
        if (wide[i] > 2147483647n || wide[i] < -2147483648n)
          throw new Error(`${source}: ${entry.name}[${i}] = ${wide[i]} does not fit in i32`);
        out[i] = Number(wide[i]);
      }
      return out;
    }
    case 'I16':
      return Int32Array.from(view(raw, 2, (b, o, n) => new Int16Array(b, o, n)));
    case 'I8':
      return Int32Array.from(new Int8Array(raw.buffer, raw.byteOffset, raw.byteLength));
    case 'U8':
    case 'BOOL':
      return Int32Array.from(raw);
    default:
      throw new Error(`${source}: tensor "${entry.name}" is ${entry.dtype}, not an integer tensor`);
  }
}

function lookup(header: SafetensorsHeader, name: string, source: string): SafetensorsEntry {
  const e = header.entries.get(name);
  if (!e) throw new Error(`${source}: no tensor named "${name}"`);
  return e;
}

/** A whole safetensors file in memory, with typed accessors. */
export class SafetensorsFile {
  readonly header: SafetensorsHeader;
  constructor(
    readonly bytes: Uint8Array,
    readonly source = 'safetensors',
  ) {
    this.header = parseSafetensorsHeader(bytes, source);
  }

  get names(): string[] {
    return [...this.header.entries.keys()];
  }

  has(name: string): boolean {
    return this.header.entries.has(name);
  }

  entry(name: string): SafetensorsEntry {
    return lookup(this.header, name, this.source);
  }

  shape(name: string): readonly number[] {
    return this.entry(name).shape;
  }

  /** Raw bytes of one tensor (a copy, aligned). */
  raw(name: string): Uint8Array {
    const e = this.entry(name);
    return this.bytes.slice(e.begin, e.end);
  }

  f32(name: string): Float32Array {
    return decodeF32(this.entry(name), this.raw(name), this.source);
  }

  i32(name: string): Int32Array {
    return decodeI32(this.entry(name), this.raw(name), this.source);
  }
}

/**
 * A safetensors file read piecewise through a FileStore: `open` reads only the prefix and header;
 * each accessor reads one tensor's byte range.
 */
export class SafetensorsReader {
  private constructor(
    readonly store: FileStore,
    readonly path: string,
    readonly header: SafetensorsHeader,
    readonly source: string,
  ) {}

  static async open(store: FileStore, path: string): Promise<SafetensorsReader> {
    const source = `${store.root}/${path}`;
    const size = await store.size(path);
    const prefix = size >= 8 ? await store.readRange(path, 0, 8) : new Uint8Array(0);
    const n = readHeaderLength(prefix, size, source);
    const header = parseHeaderJson(await store.readRange(path, 8, n), size, source);
    return new SafetensorsReader(store, path, header, source);
  }

  get names(): string[] {
    return [...this.header.entries.keys()];
  }

  has(name: string): boolean {
    return this.header.entries.has(name);
  }

  entry(name: string): SafetensorsEntry {
    return lookup(this.header, name, this.source);
  }

  async raw(name: string): Promise<Uint8Array> {
    const e = this.entry(name);
    return e.end === e.begin ? new Uint8Array(0) : this.store.readRange(this.path, e.begin, e.end - e.begin);
  }

  async f32(name: string): Promise<Float32Array> {
    return decodeF32(this.entry(name), await this.raw(name), this.source);
  }

  async i32(name: string): Promise<Int32Array> {
    return decodeI32(this.entry(name), await this.raw(name), this.source);
  }

  /** One float tensor as f16 bits (decodeF16Bits). */
  async f16Bits(name: string): Promise<Uint16Array> {
    return decodeF16Bits(this.entry(name), await this.raw(name), this.source);
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
