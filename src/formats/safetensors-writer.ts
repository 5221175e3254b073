/**
 * Writing safetensors files (the reader is ./safetensors.ts): whole, from host arrays
 * (writeSafetensors), or as a header followed by the tensors' bytes streamed in order
 * (safetensorsHeader: a checkpoint read back tensor by tensor). Both write the same bytes.
 */
import { isDim, isDType, SAFETENSORS_DTYPE_BYTES, type SafetensorsDType } from './safetensors.ts';

export interface TensorToWrite {
  dtype: SafetensorsDType;
  shape: readonly number[];
  data: Uint8Array;
}

/** Serialise tensors (in the given order) to safetensors bytes. */
export function writeSafetensors(tensors: Readonly<Record<string, TensorToWrite>>, metadata?: Record<string, string>): Uint8Array {
  const entries = Object.entries(tensors).map(([name, t]) => {
    const e = { name, dtype: t.dtype, shape: t.shape };
    const bytes = safetensorsEntryBytes(e);
    if (t.data.byteLength !== bytes)
      throw new Error(`writeSafetensors: ${name} ${t.dtype}[${t.shape}] needs ${bytes} bytes, got ${t.data.byteLength}`);
    return e;
  });
  const { header, dataBytes } = safetensorsHeader(entries, metadata);
  const out = new Uint8Array(header.byteLength + dataBytes);
  out.set(header, 0);
  let p = header.byteLength;
  for (const t of Object.values(tensors)) {
    out.set(t.data, p);
    p += t.data.byteLength;
  }
  return out;
}

/** One tensor of a safetensors file to be written, without its bytes (safetensorsHeader). */
export interface SafetensorsEntrySpec {
  readonly name: string;
  readonly dtype: SafetensorsDType;
  readonly shape: readonly number[];
}

/** Bytes of one entry's data, after checking its dtype and shape (errors name the tensor). */
export function safetensorsEntryBytes(e: SafetensorsEntrySpec): number {
  if (!isDType(e.dtype)) throw new Error(`writeSafetensors: ${e.name} has unsupported dtype ${String(e.dtype)}`);
  if (!e.shape.every(isDim)) throw new Error(`writeSafetensors: ${e.name} has invalid shape [${e.shape}]`);
  return e.shape.reduce((a, d) => a * d, 1) * SAFETENSORS_DTYPE_BYTES[e.dtype];
}

/**
 * The first bytes of a safetensors file holding `entries` in this order (the 8-byte length and the
 * JSON header, space-padded so the data starts 8-byte aligned, as the format recommends), and the
 * bytes of data that must follow: each entry's bytes in order. A writer can stream the data after it
 * (a checkpoint read back tensor by tensor); writeSafetensors writes the same bytes whole.
 */
export function safetensorsHeader(
  entries: readonly SafetensorsEntrySpec[],
  metadata?: Record<string, string>,
): { header: Uint8Array; dataBytes: number } {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const e of entries) {
    const bytes = safetensorsEntryBytes(e);
    header[e.name] = { dtype: e.dtype, shape: e.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const headerLen = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + headerLen);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLen), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.length, 8 + headerLen);
  return { header: out, dataBytes: offset };
}

/** Bytes of a Float32Array, for writeSafetensors. */
export function f32Bytes(values: ArrayLike<number>): Uint8Array {
  const f = Float32Array.from(values);
  return new Uint8Array(f.buffer);
}
