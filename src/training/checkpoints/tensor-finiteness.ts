/**
 * Finiteness of a checkpoint's tensors, checked when it is loaded (docs/durability.md §7): a NaN or an
 * infinity in the weights or in AdamW's moments, or a negative second moment (whose square root is
 * NaN), would otherwise train on silently and surface only at export, far from the file at fault.
 */

/** The first element of `values` that is not finite (or negative, with `nonNegative`), in words; undefined when there is none. */
export function badElement(values: Float32Array, nonNegative = false): string | undefined {
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    // x - x is 0 for every finite x and NaN for NaN and ±Infinity: one subtraction per element.
    if (x - x !== 0) return `${x} at element ${i}`;
    if (nonNegative && x < 0) return `the negative value ${x} at element ${i}`;
  }
  return undefined;
}
