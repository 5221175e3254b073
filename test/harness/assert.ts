/** Assertions shared by every suite. Each failure message names what was compared. */

export class AssertionError extends Error {
  override name = 'AssertionError';
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(message);
}

export function assertEqual<T>(actual: T, expected: T, what: string): void {
  if (!Object.is(actual, expected)) {
    throw new AssertionError(`${what}: expected ${String(expected)}, got ${String(actual)}`);
  }
}

export function assertDeepEqual(actual: unknown, expected: unknown, what: string): void {
  const a = JSON.stringify(actual, bigintSafe);
  const e = JSON.stringify(expected, bigintSafe);
  if (a !== e) throw new AssertionError(`${what}: expected ${e}, got ${a}`);
}

function bigintSafe(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? `${value}n` : value;
}

type Numeric = ArrayLike<number>;

/** ‖a − b‖₂ / ‖b‖₂ (b is the reference). Returns 0 when both are zero. */
/** Whether two arrays hold the same bits (Object.is per element: −0 and NaN as themselves). */
export function sameBits(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  return a.length === b.length && Array.from(a).every((v, i) => Object.is(v, b[i]));
}

export function relativeError(actual: Numeric, reference: Numeric): number {
  if (actual.length !== reference.length) {
    throw new AssertionError(`length mismatch: actual ${actual.length}, reference ${reference.length}`);
  }
  let diff = 0;
  let norm = 0;
  for (let i = 0; i < reference.length; i++) {
    const d = actual[i] - reference[i];
    diff += d * d;
    norm += reference[i] * reference[i];
  }
  if (!Number.isFinite(diff)) return Number.POSITIVE_INFINITY;
  if (norm === 0) return Math.sqrt(diff);
  return Math.sqrt(diff / norm);
}

/** Fails unless relativeError(actual, reference) ≤ tolerance; returns the error for reporting. */
export function assertRelClose(actual: Numeric, reference: Numeric, tolerance: number, what: string): number {
  const err = relativeError(actual, reference);
  if (!(err <= tolerance)) {
    throw new AssertionError(
      `${what}: relative error ${err.toExponential(3)} > ${tolerance.toExponential(1)}${firstMismatch(actual, reference)}`,
    );
  }
  return err;
}

function firstMismatch(actual: Numeric, reference: Numeric): string {
  let worst = -1;
  let worstDiff = -1;
  for (let i = 0; i < reference.length; i++) {
    const d = Math.abs(actual[i] - reference[i]);
    if (!(d <= worstDiff)) {
      worstDiff = d;
      worst = i;
    }
  }
  return worst < 0 ? '' : ` (worst at ${worst}: got ${actual[worst]}, want ${reference[worst]})`;
}

export async function assertRejects(fn: () => unknown, pattern: RegExp, what: string): Promise<Error> {
  try {
    await fn();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (!pattern.test(message)) throw new AssertionError(`${what}: error "${message}" does not match ${pattern}`);
    return err as Error;
  }
  throw new AssertionError(`${what}: expected an error matching ${pattern}, none was thrown`);
}

export function assertThrows(fn: () => unknown, pattern: RegExp, what: string): Error {
  try {
    fn();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (!pattern.test(message)) throw new AssertionError(`${what}: error "${message}" does not match ${pattern}`);
    return err as Error;
  }
  throw new AssertionError(`${what}: expected an error matching ${pattern}, none was thrown`);
}
