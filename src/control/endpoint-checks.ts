/**
 * Argument checks of DataFlowController's endpoints and options: id lists, failure reasons, counts
 * and optional caps. Every endpoint is called by code in another process or tab, so each argument is
 * checked before a store sees it; the checks live here, apart from the endpoints, so the controller
 * reads as what each endpoint does, and every endpoint refuses a bad argument with the same words.
 */
import { assertNoTensors } from '../contracts/no-tensors.ts';

/** A list of non-empty string ids (tensor-free). */
export function requireIds(ids: readonly string[], where: string): void {
  assertNoTensors(ids, where);
  if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string' || id.length === 0)) {
    throw new TypeError(`${where} must be an array of non-empty strings`);
  }
}

/** A failure's reason and retry flag (failure records stay metadata-only). */
export function requireReason(reason: string, retryable: boolean, where: string): void {
  if (typeof reason !== 'string') throw new TypeError(`${where}: reason must be a string (failure records stay metadata-only)`);
  if (typeof retryable !== 'boolean') throw new TypeError(`${where}: retryable must be a boolean`);
}

export function requireCount(value: number, where: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${where} must be a non-negative integer, got ${value}`);
}

/** An optional cap of the controller's options: a positive integer, or null (undefined) for none. */
export function positiveIntOrNull(value: number | null | undefined, name: string): number | null {
  if (value === undefined || value === null) return null;
  if (!Number.isSafeInteger(value) || value < 1)
    throw new RangeError(`DataFlowController: ${name} must be a positive integer or null, got ${value}`);
  return value;
}
