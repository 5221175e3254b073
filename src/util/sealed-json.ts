/**
 * JSON files that prove they are whole: a one-line header with the body's length and CRC-32, then
 * the body. Durable state that drives training (the ledger's snapshot, the session's sequences) is
 * written this way, so a truncated, edited or bit-flipped file is refused by name instead of
 * parsing into a different run. The body stays plain JSON for people reading the file.
 */
import { crc32 } from './crc32.ts';

const MAGIC = 'speclab-sealed-json/1';

/** `value` as a sealed JSON file image. */
export function sealJson(value: unknown): Uint8Array {
  const body = new TextEncoder().encode(`${JSON.stringify(value, null, 1)}\n`);
  const header = new TextEncoder().encode(`${JSON.stringify({ format: MAGIC, bytes: body.byteLength, crc32: crc32(body) })}\n`);
  const out = new Uint8Array(header.byteLength + body.byteLength);
  out.set(header);
  out.set(body, header.byteLength);
  return out;
}

/**
 * The value of a sealed JSON file image; `source` names the file and `what` says what it holds,
 * in every error (a missing or wrong header, a length or CRC mismatch, invalid UTF-8 or JSON).
 */
export function openSealedJson(bytes: Uint8Array, source: string, what: string): unknown {
  const refuse = (why: string): never => {
    throw new Error(`${source}: ${what} is damaged (${why}); refusing to use it`);
  };
  const newline = bytes.indexOf(0x0a);
  if (newline < 0) refuse('no header line');
  let header: { format?: unknown; bytes?: unknown; crc32?: unknown } = {};
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, newline))) as typeof header;
  } catch {
    refuse('the header line is not JSON');
  }
  if (header.format !== MAGIC) refuse(`the header names format ${JSON.stringify(header.format)}, not ${MAGIC}`);
  const body = bytes.subarray(newline + 1);
  if (body.byteLength !== header.bytes) refuse(`${body.byteLength} bytes after the header, which recorded ${String(header.bytes)}`);
  const crc = crc32(body);
  if (crc !== header.crc32)
    refuse(
      `CRC-32 ${crc.toString(16)}, the header recorded ${typeof header.crc32 === 'number' ? header.crc32.toString(16) : String(header.crc32)}`,
    );
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch (err) {
    return refuse(`its body is not JSON: ${(err as Error).message}`);
  }
}
