/**
 * Journal framing for the file-backed metadata store. One frame per record:
 *
 *   "SLJ1" (4 bytes) | payload length (u32 LE) | CRC-32 of length+payload (u32 LE) | payload (UTF-8 JSON)
 *
 * A crash can leave the last frame half written (short header, payload past the end of file, a
 * checksum mismatch in the final frame, or a zero-filled tail). `scanJournal` drops such a torn
 * tail: it was never acknowledged, because a write is acknowledged only after its fsync returns.
 * A bad frame followed by more data is different: records after it may have been acknowledged,
 * so the scan refuses (JournalCorruptError) rather than silently lose them.
 */
import { crc32 } from '../util/crc32.ts';

const MAGIC = [0x53, 0x4c, 0x4a, 0x31]; // "SLJ1"
const HEADER_BYTES = 12;
/** Far above any real record; a larger length is treated as a damaged header. */
const MAX_PAYLOAD_BYTES = 256 * 1024 * 1024;

export class JournalCorruptError extends Error {
  override name = 'JournalCorruptError';
}

export function encodeFrame(record: unknown): Uint8Array {
  const payload = new TextEncoder().encode(JSON.stringify(record));
  const frame = new Uint8Array(HEADER_BYTES + payload.length);
  frame.set(MAGIC, 0);
  const view = new DataView(frame.buffer);
  view.setUint32(4, payload.length, true);
  frame.set(payload, HEADER_BYTES);
  view.setUint32(8, crc32(checkedBytes(frame)), true);
  return frame;
}

export interface JournalScan {
  readonly records: unknown[];
  /** Bytes of intact frames from the start of the file. */
  readonly validBytes: number;
  /** Bytes dropped as a torn tail (0 when the file ended cleanly). */
  readonly tornBytes: number;
}

/** Decodes every intact frame; `where` names the file in errors. */
export function scanJournal(bytes: Uint8Array, where: string): JournalScan {
  const records: unknown[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 0;
  while (offset < bytes.length) {
    const problem = frameProblem(bytes, view, offset);
    if (problem !== undefined) {
      if (!isTornTail(bytes, view, offset)) {
        throw new JournalCorruptError(
          `${where}: damaged record at byte ${offset} (${problem}) is followed by more data; refusing to drop records that may have been acknowledged`,
        );
      }
      return { records, validBytes: offset, tornBytes: bytes.length - offset };
    }
    const length = view.getUint32(offset + 4, true);
    const payload = bytes.subarray(offset + HEADER_BYTES, offset + HEADER_BYTES + length);
    try {
      records.push(JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload)));
    } catch (err) {
      throw new JournalCorruptError(
        `${where}: record at byte ${offset} has a valid checksum but unreadable JSON (${(err as Error).message})`,
      );
    }
    offset += HEADER_BYTES + length;
  }
  return { records, validBytes: offset, tornBytes: 0 };
}

/** Why the frame at `offset` is not intact, or undefined when it is. */
function frameProblem(bytes: Uint8Array, view: DataView, offset: number): string | undefined {
  if (bytes.length - offset < HEADER_BYTES) return 'truncated header';
  for (let i = 0; i < MAGIC.length; i++) if (bytes[offset + i] !== MAGIC[i]) return 'bad magic';
  const length = view.getUint32(offset + 4, true);
  if (length === 0 || length > MAX_PAYLOAD_BYTES) return `implausible length ${length}`;
  if (offset + HEADER_BYTES + length > bytes.length) return 'truncated payload';
  const frame = bytes.subarray(offset, offset + HEADER_BYTES + length);
  if (crc32(checkedBytes(frame)) !== view.getUint32(offset + 8, true)) return 'checksum mismatch';
  return undefined;
}

/** A damaged frame is a torn tail when nothing acknowledged can follow it. */
function isTornTail(bytes: Uint8Array, view: DataView, offset: number): boolean {
  const rest = bytes.length - offset;
  if (rest < HEADER_BYTES) return true;
  if (bytes.subarray(offset).every((b) => b === 0)) return true;
  const hasMagic = MAGIC.every((m, i) => bytes[offset + i] === m);
  if (!hasMagic) return false;
  // The last frame, cut short or garbled by a crash mid-write, ends at (or past) the end of file.
  const length = view.getUint32(offset + 4, true);
  return length <= MAX_PAYLOAD_BYTES && offset + HEADER_BYTES + length >= bytes.length;
}

/** The checksum covers the length field and the payload, not the magic or the checksum itself. */
function checkedBytes(frame: Uint8Array): Uint8Array {
  const out = new Uint8Array(frame.length - 8);
  out.set(frame.subarray(4, 8), 0);
  out.set(frame.subarray(HEADER_BYTES), 4);
  return out;
}
