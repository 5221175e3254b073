/**
 * Chat datasets as users bring them (SpecForge's input): JSONL (one row per line), JSON (an array
 * of rows) or Parquet (as Hugging Face datasets ship them, snappy or zstd), picked by the file's
 * extension, read into conversations of user / assistant / system messages.
 *
 * A row is `{"id"?, "conversations" | "messages": [turn, …], "system"?}` and a turn is either
 * `{"role", "content"}` (OpenAI / HF messages) or ShareGPT's `{"from", "value"}` with `from`
 * human → user, gpt → assistant, system → system (user and assistant are accepted too). A
 * non-empty `system` field becomes a leading system turn.
 *
 * Malformed data is refused with one line naming the file, the row and the field, because a
 * half-read dataset trains a different draft than the one asked for. Rows that are well formed but
 * cannot be trained on — no assistant turn, or turns that do not alternate user / assistant (raw
 * ShareGPT dumps have some) — are skipped with their reason instead: a few such rows should not
 * fail a whole dataset, and the caller reports how many there were.
 *
 * `line` numbers a row: its 1-based line in a JSONL file, its 1-based index in a JSON array or a
 * Parquet file. Nothing here does I/O: callers read the bytes (the file name picks the format).
 */
import { parquetMetadata, parquetReadObjects, parquetSchema } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import type { ChatMessage } from '../formats/tokenizer.ts';

export interface Conversation {
  /** The row's `id`, or `<file>:<line>` when it has none. */
  readonly id: string;
  readonly line: number;
  readonly messages: readonly ChatMessage[];
}

export interface SkippedRow {
  readonly line: number;
  readonly reason: string;
}

export interface ConversationFile {
  readonly rows: Conversation[];
  readonly skipped: SkippedRow[];
}

export type ConversationFormat = 'jsonl' | 'json' | 'parquet';

/** The format a file name's extension says, or a refusal naming the ones that are read. */
export function conversationFormat(file: string): ConversationFormat {
  const ext = /\.([^./\\]+)$/.exec(file)?.[1]?.toLowerCase();
  if (ext === 'jsonl' || ext === 'json' || ext === 'parquet') return ext;
  throw new Error(
    `${file}: unknown conversation file type ${ext ? `".${ext}"` : '(no extension)'}; expected .jsonl (one row per line), .json (an array of rows) or .parquet`,
  );
}

/** Reads every row of a conversation file; `file` names it in errors and picks the format. */
export async function readConversations(bytes: Uint8Array, file: string): Promise<ConversationFile> {
  const format = conversationFormat(file);
  if (format === 'parquet') return collectRows(await parquetRows(bytes, file), file);
  if (format === 'json') {
    const text = decodeUtf8(bytes, file);
    let rows: unknown;
    try {
      rows = JSON.parse(text);
    } catch (err) {
      throw new Error(`${file}: not valid JSON (${(err as Error).message})`, { cause: err });
    }
    if (!Array.isArray(rows)) throw new Error(`${file}: expected a JSON array of rows, got ${typeName(rows)}`);
    return collectRows(
      rows.map((row, i) => ({ line: i + 1, row })),
      file,
    );
  }
  return collectRows(jsonlRows(bytes, file), file);
}

/**
 * The rows of a JSONL file, decoded line by line: a file larger than one JavaScript string can hold
 * (about 512 MiB) is read all the same, and a bad line is named by its number.
 */
function jsonlRows(bytes: Uint8Array, file: string): { line: number; row: unknown }[] {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const rows: { line: number; row: unknown }[] = [];
  let start = 0;
  for (let line = 1; start < bytes.length; line++) {
    const nl = bytes.indexOf(0x0a, start);
    const end = nl < 0 ? bytes.length : nl;
    let source: string;
    try {
      source = decoder.decode(bytes.subarray(start, end));
    } catch {
      throw new Error(`${file}:${line}: not valid UTF-8 (a bad byte sequence in bytes ${start}–${end} of the file)`);
    }
    start = end + 1;
    if (source.endsWith('\r')) source = source.slice(0, -1);
    if (source.trim() === '') continue; // blank lines (a trailing newline, spacing) are not rows
    try {
      rows.push({ line, row: JSON.parse(source) });
    } catch (err) {
      throw new Error(`${file}:${line}: not valid JSON (${(err as Error).message})`, { cause: err });
    }
  }
  return rows;
}

/** Strict UTF-8: a byte sequence that is not UTF-8 is refused naming its line, never replaced by U+FFFD. */
function decodeUtf8(bytes: Uint8Array, file: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    let start = 0;
    for (let line = 1; ; line++) {
      const nl = bytes.indexOf(0x0a, start);
      const end = nl < 0 ? bytes.length : nl;
      try {
        new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(start, end));
      } catch {
        throw new Error(`${file}:${line}: not valid UTF-8 (a bad byte sequence in bytes ${start}–${end} of the file)`);
      }
      if (nl < 0) throw new Error(`${file}: not valid UTF-8`);
      start = nl + 1;
    }
  }
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function collectRows(rows: readonly { line: number; row: unknown }[], file: string): ConversationFile {
  const out: Conversation[] = [];
  const skipped: SkippedRow[] = [];
  const seen = new Map<string, number>();
  for (const { line, row } of rows) {
    const parsed = parseConversationRow(row, `${file}:${line}`);
    if ('reason' in parsed) {
      skipped.push({ line, reason: parsed.reason });
      continue;
    }
    const id = parsed.id ?? `${file}:${line}`;
    // Sample ids are the dedup key downstream: a repeated one would silently drop a conversation.
    const first = seen.get(id);
    if (first !== undefined) throw new Error(`${file}:${line}: id ${JSON.stringify(id)} repeats the id of row ${first}`);
    seen.set(id, line);
    out.push({ id, line, messages: parsed.messages });
  }
  return { rows: out, skipped };
}

const ROLE_OF_FROM: Readonly<Record<string, ChatMessage['role']>> = {
  human: 'user',
  gpt: 'assistant',
  system: 'system',
  user: 'user',
  assistant: 'assistant',
};
const ROLES: readonly string[] = ['user', 'assistant', 'system'];

/**
 * One row → its id (if it has one) and messages, a skip reason, or a refusal prefixed by `where`
 * (`file:line`). A null field counts as absent: a Parquet struct has every field of its schema
 * (turns `{role, content, from, value}` with two of them null), and JSON exported from such a
 * dataset keeps the nulls.
 */
export function parseConversationRow(
  row: unknown,
  where: string,
): { id: string | undefined; messages: ChatMessage[] } | { reason: string } {
  if (!row || typeof row !== 'object' || Array.isArray(row)) throw new Error(`${where}: expected a JSON object, got ${typeName(row)}`);
  const r = present(row as Record<string, unknown>);
  const key = 'conversations' in r ? 'conversations' : 'messages';
  if ('conversations' in r && 'messages' in r) throw new Error(`${where}: has both "conversations" and "messages"; keep one`);
  if (!(key in r))
    throw new Error(`${where}: has neither "conversations" nor "messages" (a list of {role, content} or {from, value} turns)`);
  const turns = r[key];
  if (!Array.isArray(turns)) throw new Error(`${where}: ${key} is ${typeName(turns)}, expected a list of turns`);
  let id: string | undefined;
  if ('id' in r) {
    const raw = r.id;
    if (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'bigint')
      throw new Error(`${where}: id is ${typeName(raw)}, expected a string or a number`);
    id = String(raw) === '' ? undefined : String(raw);
  }
  const messages = turns.map((turn, i) => parseTurn(turn, `${where}: ${key}[${i}]`));
  if ('system' in r && r.system !== '') {
    if (typeof r.system !== 'string') throw new Error(`${where}: system is ${typeName(r.system)}, expected a string`);
    if (messages[0]?.role === 'system') throw new Error(`${where}: has both a "system" field and a leading system turn; keep one`);
    messages.unshift({ role: 'system', content: r.system });
  }
  if (!messages.some((m) => m.role === 'assistant')) return { reason: 'no assistant turn' };
  const order = turnOrderProblem(messages, key, 'system' in r && r.system !== '');
  return order ? { reason: order } : { id, messages };
}

/** An object's fields without the null-valued ones. */
function present(obj: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== null && v !== undefined));
}

function parseTurn(turn: unknown, where: string): ChatMessage {
  if (!turn || typeof turn !== 'object' || Array.isArray(turn))
    throw new Error(`${where} is ${typeName(turn)}, expected a {role, content} or {from, value} object`);
  const t = present(turn as Record<string, unknown>);
  const openai = 'role' in t || 'content' in t;
  const sharegpt = 'from' in t || 'value' in t;
  if (openai && sharegpt) throw new Error(`${where} mixes role/content with from/value; a turn is {role, content} or {from, value}`);
  if (!openai && !sharegpt) throw new Error(`${where} has neither role/content nor from/value`);
  const [roleKey, contentKey] = openai ? ['role', 'content'] : ['from', 'value'];
  if (!(roleKey in t)) throw new Error(`${where} has ${contentKey} but no ${roleKey}`);
  if (!(contentKey in t))
    throw new Error(
      contentKey in (turn as object) ? `${where}.${contentKey} is null, expected a string` : `${where} has ${roleKey} but no ${contentKey}`,
    );
  const raw = t[roleKey];
  const role = openai
    ? ROLES.includes(raw as string)
      ? (raw as ChatMessage['role'])
      : undefined
    : typeof raw === 'string' && Object.hasOwn(ROLE_OF_FROM, raw)
      ? ROLE_OF_FROM[raw]
      : undefined;
  if (role === undefined) {
    const allowed = openai ? 'user, assistant or system' : 'human, gpt, system, user or assistant';
    throw new Error(
      `${where}.${roleKey} ${typeof raw === 'bigint' ? String(raw) : (JSON.stringify(raw) ?? String(raw))} is not ${allowed}`,
    );
  }
  const content = t[contentKey];
  if (typeof content !== 'string') throw new Error(`${where}.${contentKey} is ${typeName(content)}, expected a string`);
  return { role, content };
}

/**
 * Why the turns cannot be rendered as one training conversation, or undefined: an optional system
 * turn first, then user and assistant alternating from a user turn (what chat templates expect).
 */
function turnOrderProblem(messages: readonly ChatMessage[], key: string, systemField: boolean): string | undefined {
  const first = messages[0]?.role === 'system' ? 1 : 0;
  for (let i = first; i < messages.length; i++) {
    const want = (i - first) % 2 === 0 ? 'user' : 'assistant';
    if (messages[i].role !== want) {
      const index = systemField ? i - 1 : i; // the index in the file's list, not counting the system field
      return `${key}[${index}] is a ${messages[i].role} turn where the ${want} turn belongs (turns alternate user/assistant after an optional first system turn)`;
    }
  }
  return undefined;
}

/** Parquet rows with the conversation column plus `id` and `system` when the file has them. */
async function parquetRows(bytes: Uint8Array, file: string): Promise<{ line: number; row: unknown }[]> {
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  let columns: string[];
  let metadata: ReturnType<typeof parquetMetadata>;
  try {
    metadata = parquetMetadata(buffer);
    columns = parquetSchema(metadata).children.map((c) => c.element.name);
  } catch (err) {
    throw new Error(`${file}: not a readable Parquet file (${(err as Error).message})`, { cause: err });
  }
  const conversation = columns.filter((c) => c === 'conversations' || c === 'messages');
  if (conversation.length !== 1) {
    throw new Error(
      `${file}: expected one "conversations" or "messages" column, found ${conversation.length === 0 ? 'neither' : 'both'} (columns: ${columns.join(', ')})`,
    );
  }
  // Only the columns a conversation needs: a dataset's other columns may be large or of types we never use.
  const wanted = [...conversation, ...['id', 'system'].filter((c) => columns.includes(c))];
  let rows: Record<string, unknown>[];
  try {
    rows = await parquetReadObjects({ file: buffer, metadata, columns: wanted, compressors, rowFormat: 'object' });
  } catch (err) {
    throw new Error(`${file}: cannot read Parquet column ${wanted.join(', ')} (${(err as Error).message})`, { cause: err });
  }
  return rows.map((row, i) => ({ line: i + 1, row }));
}
