/**
 * Byte sizes for people: "1.50 GiB" out, "8GB" / "512MiB" / "1e9" in. Decimal units (kB, MB, GB,
 * TB) are powers of 1000 and binary ones (KiB, MiB, GiB, TiB) powers of 1024, as their names say,
 * so a budget typed from a spec sheet ("8GB") means what the sheet means.
 */

const UNITS: Readonly<Record<string, number>> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

/** Binary units for output: GPU limits are powers of two, so they print as round numbers. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const steps = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let i = 0;
  while (Math.abs(value) >= 1024 && i < steps.length - 1) {
    value /= 1024;
    i++;
  }
  return i === 0 ? `${value} B` : `${value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2)} ${steps[i]}`;
}

/**
 * A positive whole number of bytes from "8GB", "8 GiB", "512MiB", "4096" or "1e9"; `what` names the
 * flag or field in the one-line error.
 */
export function parseByteSize(text: string, what: string): number {
  const m = /^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m ? UNITS[(m[2] || 'b').toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new Error(`${what}: ${JSON.stringify(text)} is not a byte size (e.g. 8GB, 512MiB, 1073741824)`);
  const bytes = Math.floor(Number(m[1]) * unit);
  if (!(bytes >= 1) || !Number.isSafeInteger(bytes))
    throw new Error(`${what}: ${JSON.stringify(text)} must be between 1 byte and ${Number.MAX_SAFE_INTEGER} bytes`);
  return bytes;
}
