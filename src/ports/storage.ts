/**
 * Runtime-neutral storage interfaces every plane uses: a durable file store (a directory on disk in
 * Node/Deno, IndexedDB in the browser), append logs, and a transactional key-value database
 * (IndexedDB). The adapters in src/platform/ implement them; nothing here touches a runtime global.
 */
import type { RuntimeName } from './runtime.ts';
import type { ReadBudget } from './read-budget.ts';

/**
 * Durable byte storage addressed by slash-separated relative paths: a directory on disk in
 * Node/Deno, IndexedDB in the browser. Writes are atomic (temp + rename, or one transaction).
 */
export interface FileStore {
  /** Human-readable location, for messages. */
  readonly root: string;
  /**
   * The whole file. With a budget (files from outside: datasets, configs, tokenizers) it is read
   * as a stream that stops once the budget is spent, refusing the file by name (ReadBudgetError).
   */
  read(path: string, budget?: ReadBudget): Promise<Uint8Array>;
  /** Reads `length` bytes at `offset` without loading the whole file. */
  readRange(path: string, offset: number, length: number): Promise<Uint8Array>;
  size(path: string): Promise<number>;
  writeAtomic(path: string, bytes: Uint8Array): Promise<void>;
  /**
   * writeAtomic of the concatenation of `chunks`, written as they come (a checkpoint read back tensor
   * by tensor), so the whole file is never in memory where the store writes to disk. Resolves with
   * the bytes written; on failure the target is untouched and no temp file is left.
   */
  writeAtomicChunks(path: string, chunks: AsyncIterable<Uint8Array>): Promise<number>;
  exists(path: string): Promise<boolean>;
  /** Entries directly under `dir` (names, sorted). Missing dir → []. */
  list(dir: string): Promise<string[]>;
  remove(path: string): Promise<void>;
  /**
   * Opens (creating it and its folder if needed) a file for appending, e.g. a journal, and fsyncs
   * its folder so the new entry (and any rename made just before) survives a power cut. Node and
   * Deno only: IndexedDB has no append + fsync, so the browser store throws and callers use an
   * IndexedDB-backed design instead.
   */
  openAppendLog(path: string): Promise<AppendLog>;
  /**
   * Takes an exclusive lock file at `path` for this process, or fails naming the process that holds
   * it. A lock whose owner is a process of this machine that no longer runs is stale and is taken
   * over. Node and Deno only; a store without it cannot be locked (the browser's runs live in one
   * tab's IndexedDB).
   */
  lockExclusive?(path: string): Promise<FileLock>;
}

/** A held lock file; `release` removes it (idempotent). */
export interface FileLock {
  readonly path: string;
  release(): Promise<void>;
}

/** What a lock file records about its owner. */
export interface LockOwner {
  readonly pid: number;
  readonly host: string;
  readonly since: string;
}

/** A lock file's text as its owner, or null when it is not one (half-written, edited, another format). */
export function parseLockOwner(text: string): LockOwner | null {
  try {
    const owner = JSON.parse(text) as Partial<LockOwner> | null;
    return owner && Number.isSafeInteger(owner.pid) && typeof owner.host === 'string' && typeof owner.since === 'string'
      ? (owner as LockOwner)
      : null;
  } catch {
    return null;
  }
}

/** The refusal when a live process holds a lock: callers that can wait for it (a download) tell it by its class. */
export class LockHeldError extends Error {
  constructor(
    readonly path: string,
    readonly owner: LockOwner | null,
  ) {
    super(
      `${path}: this run folder is in use by ${lockOwnerText(owner)}; wait for it to finish, or delete the lock file if that process is gone`,
    );
    this.name = 'LockHeldError';
  }
}

/** Who holds a lock, in words. */
export function lockOwnerText(owner: LockOwner | null): string {
  return owner ? `process ${owner.pid} on ${owner.host} (since ${owner.since})` : 'another process (the lock file is unreadable)';
}

/** An append-only file handle. `sync` flushes the data to stable storage before resolving (fsync). */
export interface AppendLog {
  /** Human-readable location, for messages. */
  readonly path: string;
  append(bytes: Uint8Array, options?: { sync?: boolean }): Promise<void>;
  close(): Promise<void>;
}

/**
 * One object store of a key-value database: values under out-of-line keys, either given by the
 * caller or generated in increasing order (`autoIncrement`), optionally with indexes on fields.
 */
export interface KeyValueStoreSchema {
  readonly name: string;
  readonly autoIncrement?: boolean;
  readonly indexes?: readonly { readonly name: string; readonly keyPath: string; readonly unique: boolean }[];
}

/** The object stores a database must have; opening creates the missing ones (a schema upgrade). */
export interface KeyValueSchema {
  readonly version: number;
  readonly stores: readonly KeyValueStoreSchema[];
}

export type KeyValueKey = string | number;

/**
 * Requests inside one transaction (IndexedDB semantics). Values are copied with the structured
 * clone algorithm. Reads see the transaction's own earlier writes; `getAll`/`getAllKeys` return
 * key order, which for an auto-increment store is insertion order.
 */
export interface KeyValueTransaction {
  get(store: string, key: KeyValueKey): Promise<unknown>;
  getAll(store: string): Promise<unknown[]>;
  getAllKeys(store: string): Promise<KeyValueKey[]>;
  count(store: string): Promise<number>;
  /** The value whose indexed field equals `value`, or undefined. */
  getByIndex(store: string, index: string, value: KeyValueKey): Promise<unknown>;
  /** The primary key of the value whose indexed field equals `value`, or undefined. */
  getKeyByIndex(store: string, index: string, value: KeyValueKey): Promise<KeyValueKey | undefined>;
  /** Inserts or replaces; `key` is omitted for an auto-increment store. Resolves to the key used. */
  put(store: string, value: unknown, key?: KeyValueKey): Promise<KeyValueKey>;
}

/** An open key-value database (IndexedDB in the browser). */
export interface KeyValueDatabase {
  readonly name: string;
  /**
   * Runs `body` as ONE transaction over `stores` and resolves with its result only after the
   * transaction has committed (readwrite transactions ask for strict durability: flushed to disk).
   * If `body` throws or any request fails, the transaction is aborted, nothing it wrote is kept,
   * and the promise rejects. `body` may await only this transaction's requests: awaiting anything
   * else lets IndexedDB auto-commit the transaction early.
   */
  transaction<T>(stores: readonly string[], mode: 'readonly' | 'readwrite', body: (tx: KeyValueTransaction) => Promise<T>): Promise<T>;
  /** Closes the connection once its running transactions finish; later transactions are refused. */
  close(): void;
}

/** The part of a platform that opens key-value databases (IndexedDB in the browser). */
export interface KeyValueHost {
  /**
   * Opens (creating or upgrading it to `schema`) a transactional key-value database: IndexedDB in
   * the browser, where it backs the durable metadata store. Node and Deno reject: there the durable
   * metadata store is the file journal (FileMetadataStore).
   */
  openKeyValueDatabase(name: string, schema: KeyValueSchema): Promise<KeyValueDatabase>;
  /** Deletes a key-value database (waits for open connections to close). Browser only, like open. */
  deleteKeyValueDatabase(name: string): Promise<void>;
}

/** What Node and Deno answer for `openKeyValueDatabase` / `deleteKeyValueDatabase`. */
export function keyValueDatabaseUnavailable(runtime: RuntimeName, name: string): Promise<never> {
  return Promise.reject(
    new Error(
      `key-value database "${name}": IndexedDB is a browser capability and is not available in ${runtime}; for a durable metadata store in ${runtime} use the file metadata store (FileMetadataStore.open(platform.files(dir)))`,
    ),
  );
}

/**
 * Runs one file operation and, when it fails, rethrows with the full path and the operation in the
 * message (the runtimes' own messages for EISDIR or ENOSPC name no path). The error's `code`
 * (ENOENT, ENOSPC, …) is kept for callers that branch on it.
 */
export async function namingPath<T>(path: string, op: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (err) {
    const e = err as Error & { code?: string };
    if (typeof e?.message === 'string' && e.message.startsWith(`${path}: `)) throw err;
    const why =
      e?.code === 'EISDIR' || e?.name === 'IsADirectory'
        ? 'is a directory, not a file'
        : e?.code === 'ENOSPC'
          ? 'no space left on the device'
          : (e?.message ?? String(err));
    throw Object.assign(new Error(`${path}: ${op} failed: ${why}`, { cause: err }), { code: e?.code });
  }
}
