/**
 * The one rule for the names the data plane turns into store keys and object properties
 * (partitions, fields, consumer tasks) and the closed set of dtypes a row may have.
 *
 * Names become parts of Redis keys (`<prefix>{<partition>}:…`, where the braces are the cluster hash
 * tag): a brace in a partition name would end the tag early and let one partition's keys land on
 * another's, so registering one could delete the other's rows. Names also become keys of plain
 * objects (columns, field → dtype records), where `__proto__` or `constructor` would reach the
 * prototype instead of an own property. So every entry point (the client, the gateway, both
 * backends) checks names here, and a dtype is accepted only as an own property of the dtype table.
 */
import { BYTES_PER_ELEMENT, type DType } from '../gpu/tensor.ts';
import { DataPlaneError } from './errors.ts';

/** A letter or digit, then up to 127 letters, digits, `.`, `_` or `-` (and no `..`, checked apart). */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** What NAME_PATTERN allows, in words, for error messages. */
export const NAME_RULE = '1..128 characters of [A-Za-z0-9._-], starting with a letter or digit, without ".."';

// Every property a plain object inherits (constructor, toString, hasOwnProperty, __proto__, …).
const INHERITED_KEYS: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));

/** Every dtype a data-plane row may have, in the table's order. */
export const DTYPES: readonly DType[] = Object.freeze(Object.keys(BYTES_PER_ELEMENT) as DType[]);

/** True only for a dtype of the closed set (an own property of the table, never an inherited one). */
export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.hasOwn(BYTES_PER_ELEMENT, value);
}

/** `value` as a dtype, or an `invalid_argument` error naming `what` and the allowed set. */
export function checkDType(value: unknown, what: string): DType {
  if (!isDType(value))
    throw new DataPlaneError('invalid_argument', `${what} has dtype ${JSON.stringify(value)}; expected one of ${DTYPES.join(', ')}`);
  return value;
}

/** Why `value` is not a valid name, or null when it is one. */
export function nameProblem(value: unknown): string | null {
  if (typeof value !== 'string') return `must be a string, got ${value === null ? 'null' : typeof value}`;
  if (!NAME_PATTERN.test(value) || value.includes('..')) return `is not a valid name (${NAME_RULE})`;
  if (INHERITED_KEYS.has(value)) return 'is reserved (every JavaScript object inherits a property of that name)';
  return null;
}

/** `value` as a partition, field or task name, or an `invalid_argument` error naming `what` and the value. */
export function checkName(value: unknown, what: string): string {
  const problem = nameProblem(value);
  if (problem !== null) {
    const shown = typeof value === 'string' ? JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value) : '';
    throw new DataPlaneError('invalid_argument', `${what}${shown ? ` ${shown}` : ''} ${problem}`);
  }
  return value as string;
}
