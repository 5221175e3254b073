/**
 * Byte and line budgets for reading files that come from outside (datasets, configs, tokenizers,
 * chat templates): a file store given a budget reads as a stream and stops as soon as the budget is
 * spent, so an endless stream (`--data /dev/zero`, a FIFO, a symlink to a device) or a huge file is
 * refused by name within seconds and in bounded memory instead of filling it.
 */

/** The most a read may take, and what the file is (for the refusal). */
export interface ReadBudget {
  /** What the file is, e.g. "a JSONL data file" (for the refusal). */
  readonly what: string;
  readonly maxBytes: number;
  /** For line formats (JSONL): the longest line accepted, in bytes. */
  readonly maxLineBytes?: number;
}

const MiB = 2 ** 20;

/**
 * The budgets of every reader of outside input. Generous for real use (a large tokenizer.json is
 * about 11 MiB, a chat dataset hundreds of MiB), small enough that a wrong file fails fast.
 */
export const READ_BUDGETS = {
  /** JSONL is decoded line by line, so it may be larger than one JavaScript string holds. */
  jsonlData: { what: 'a JSONL data file', maxBytes: 2048 * MiB, maxLineBytes: 64 * MiB },
  /** A JSON array is one JavaScript string (V8 holds at most about 512 MiB of text). */
  jsonData: { what: 'a JSON data file', maxBytes: 500 * MiB },
  parquetData: { what: 'a Parquet data file', maxBytes: 2048 * MiB },
  /** A prompts file (JSON: an array of prompts). */
  promptsFile: { what: 'a prompts file', maxBytes: 256 * MiB },
  tokenizer: { what: 'a tokenizer file', maxBytes: 256 * MiB },
  /** config.json, tokenizer_config.json, generation settings, safetensors indexes, run settings. */
  config: { what: 'a configuration file', maxBytes: 64 * MiB },
  chatTemplate: { what: 'a chat template', maxBytes: 4 * MiB },
  /** A Hugging Face cache ref or a token file: one short line. */
  smallText: { what: 'a one-line text file', maxBytes: 1 * MiB },
} as const satisfies Record<string, ReadBudget>;

/** The refusal of a read over its budget; `code` lets callers tell it from an I/O error. */
export class ReadBudgetError extends Error {
  readonly code = 'EFBIG';
  constructor(message: string) {
    super(message);
    this.name = 'ReadBudgetError';
  }
}

function sizeText(bytes: number): string {
  return bytes % MiB === 0 ? `${bytes / MiB} MiB` : `${bytes} bytes`;
}

/** The refusal of a file whose size (from stat) is already over the budget. */
export function overBudgetError(path: string, budget: ReadBudget): ReadBudgetError {
  return new ReadBudgetError(`${path}: larger than the ${sizeText(budget.maxBytes)} limit for ${budget.what}; split it into smaller files`);
}

/**
 * Counts the bytes of a read as its chunks arrive and throws as soon as the file is over its byte
 * budget or, for line formats, a line is over its line budget (naming the line).
 */
export class ReadBudgetMeter {
  private total = 0;
  private line = 1;
  private lineBytes = 0;
  constructor(
    private readonly path: string,
    private readonly budget: ReadBudget,
  ) {}

  take(chunk: Uint8Array): void {
    this.total += chunk.byteLength;
    if (this.total > this.budget.maxBytes) throw overBudgetError(this.path, this.budget);
    const maxLine = this.budget.maxLineBytes;
    if (maxLine === undefined) return;
    let from = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, from);
      const end = nl < 0 ? chunk.byteLength : nl;
      this.lineBytes += end - from;
      if (this.lineBytes > maxLine)
        throw new ReadBudgetError(
          `${this.path}: more than ${sizeText(maxLine)} in one line (line ${this.line}), the limit for ${this.budget.what}`,
        );
      if (nl < 0) return;
      this.line++;
      this.lineBytes = 0;
      from = nl + 1;
    }
  }
}

/**
 * For stores that hold a file whole (a browser's): refuses a size over the budget before the bytes
 * are fetched, where the store knows the size (a File), and checks the bytes after.
 */
export function checkSizeWithinBudget(path: string, size: number, budget: ReadBudget | undefined): void {
  if (budget && size > budget.maxBytes) throw overBudgetError(path, budget);
}

/** `bytes` once they pass `budget` (no budget: as they are). */
export function withinBudget(path: string, bytes: Uint8Array, budget: ReadBudget | undefined): Uint8Array {
  if (budget) new ReadBudgetMeter(path, budget).take(bytes);
  return bytes;
}

/** The chunks of a read joined into one array. */
export function joinChunks(chunks: readonly Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1 && chunks[0].byteLength === total) return chunks[0];
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}
