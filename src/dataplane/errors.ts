/**
 * The experience data plane's errors, with codes stable across backends. On their own so the
 * contract (types.ts) and the batch metadata (meta.ts) can both use them without importing each
 * other.
 */

export type DataPlaneErrorCode =
  | 'invalid_argument'
  | 'unknown_partition'
  | 'unknown_task'
  | 'unknown_field'
  | 'unknown_sample'
  | 'field_not_produced'
  | 'dtype_mismatch'
  | 'conflict'
  | 'lease_lost'
  | 'timeout'
  | 'closed'
  /** The gateway token's scope does not allow this operation (or this form of it). */
  | 'forbidden'
  /** The store's server cannot be reached, dropped the connection, or did not answer in time. */
  | 'unavailable';

/** Every data-plane failure; `code` is stable across backends so callers and tests can branch on it. */
export class DataPlaneError extends Error {
  override name = 'DataPlaneError';
  constructor(
    readonly code: DataPlaneErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** A blocking claim ran out of time; the message names the lagging fields and how many rows were ready. */
export class ClaimTimeoutError extends DataPlaneError {
  override name = 'TimeoutError';
  constructor(
    message: string,
    readonly ready: number,
    readonly lagging: Readonly<Record<string, number>>,
  ) {
    super('timeout', message);
  }
}

/** An ack/release found rows no longer held by its lease; rows still held were settled anyway. */
export class LeaseLostError extends DataPlaneError {
  override name = 'LeaseLostError';
  constructor(
    message: string,
    readonly settled: readonly string[],
    readonly lost: readonly string[],
  ) {
    super('lease_lost', message);
  }
}

/** Max ids listed in one error message (the count is always given). */
export const ERROR_ID_LIMIT = 8;

export function listIds(ids: readonly string[]): string {
  const shown = ids
    .slice(0, ERROR_ID_LIMIT)
    .map((id) => JSON.stringify(id))
    .join(', ');
  return ids.length > ERROR_ID_LIMIT ? `${shown}, … (${ids.length} in all)` : shown;
}
