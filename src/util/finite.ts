/** Finiteness checks at the edges where garbage would otherwise flow on silently. */

/** Index of the first NaN or ±Infinity in `values`, or -1 when every value is finite. */
export function firstNonFinite(values: ArrayLike<number>): number {
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i])) return i;
  return -1;
}

/** Throws `${where}: … ${what} …` naming the first non-finite element, if any. */
export function assertFinite(values: ArrayLike<number>, what: string, where: string): void {
  const i = firstNonFinite(values);
  if (i >= 0) throw new Error(`${where}: ${what} holds a non-finite value (${values[i]}) at element ${i} of ${values.length}; refusing it`);
}
