/**
 * Numbers from the command line, read strictly. `Number()` alone takes "0x10" as 16, "0b11" as 3,
 * " " (or "") as 0 and "Infinity" as a number, so a typo or a stray blank quietly becomes a
 * setting; and an unbounded "1e9" becomes a billion-token allocation minutes later. Every numeric
 * flag of the CLI is read here (as commander argParsers, src/cli/options.ts), before any file is read
 * or anything allocated: decimal text, then a range, and any error is one line that starts with the flag.
 */

/** An inclusive range by default; `exclusiveMin`/`exclusiveMax` make that end open. */
export interface Bounds {
  min: number;
  max: number;
  exclusiveMin?: boolean;
  exclusiveMax?: boolean;
}

/** The seed range of every command: the generators keep 32 bits (src/util/random.ts). */
export const SEED_BOUNDS: Bounds = { min: 0, max: 2 ** 32 - 1 };
/** Tokens generated per prompt: the bound of --max-new-tokens (every command) and train's --response-length. */
export const NEW_TOKENS_BOUNDS: Bounds = { min: 1, max: 1_048_576 };
/** Token ids travel as Int32 on the GPU. */
const MAX_TOKEN_ID = 2 ** 31 - 1;

/** A flag's number, written in decimal (an exponent is fine); range checks are the caller's. */
export function decimalNumber(flag: string, text: string): number {
  if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(text)) throw new Error(`${flag}: ${JSON.stringify(text)} is not a decimal number`);
  return Number(text);
}

/** A decimal integer within `bounds`. */
export function decimalInt(flag: string, text: string, bounds: Bounds): number {
  const value = decimalNumber(flag, text);
  if (!Number.isInteger(value)) throw new Error(`${flag}: ${value} is not an integer`);
  return inBounds(flag, value, bounds);
}

/** A decimal number within `bounds` (finite, as every bound is). */
export function decimalFloat(flag: string, text: string, bounds: Bounds): number {
  return inBounds(flag, decimalNumber(flag, text), bounds);
}

/** Decimal integers within `bounds`, separated by commas and/or blanks (e.g. layer ids "1,2,3"). */
export function decimalIntList(flag: string, text: string, bounds: Bounds): number[] {
  return listItems(text).map((item) => decimalInt(flag, item, bounds));
}

/** Token ids: plain non-negative decimal integers separated by commas and/or blanks. */
export function tokenIdList(flag: string, text: string): number[] {
  return listItems(text).map((item) => {
    if (!/^\d+$/.test(item)) throw new Error(`${flag}: ${JSON.stringify(item)} is not a token id (a non-negative decimal integer)`);
    return inBounds(flag, Number(item), { min: 0, max: MAX_TOKEN_ID });
  });
}

function listItems(text: string): string[] {
  return text.split(/[\s,]+/).filter((s) => s.length > 0);
}

function inBounds(flag: string, value: number, b: Bounds): number {
  if (b.exclusiveMin ? !(value > b.min) : !(value >= b.min))
    throw new Error(`${flag}: ${value} ${b.exclusiveMin ? 'must be above' : 'is under the minimum'} ${b.min}`);
  if (b.exclusiveMax ? !(value < b.max) : !(value <= b.max))
    throw new Error(`${flag}: ${value} ${b.exclusiveMax ? 'must be under' : 'is over the limit'} ${b.max}`);
  return value;
}

// Positions are a target's limit, checked by training and evaluation alike (src/util/positions.ts).
export { checkPositions, type PositionsContext } from '../util/positions.ts';
