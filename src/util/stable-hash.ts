/**
 * A stable 8-hex-digit hash of a JSON value: CRC-32 of its canonical JSON (object keys sorted,
 * undefined members dropped), so two equal settings objects hash alike whatever their key order.
 * Run contracts use it to notice a resume on other settings or other data.
 */
import { crc32 } from './crc32.ts';

export function stableHash(value: unknown): string {
  return crc32(new TextEncoder().encode(canonicalJson(value)))
    .toString(16)
    .padStart(8, '0');
}

/** JSON with sorted object keys and no undefined members. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
