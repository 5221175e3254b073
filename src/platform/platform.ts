/**
 * The boundary between SpecLab and the runtime it runs in (Node + Dawn, Deno, a browser tab).
 *
 * Everything that touches a runtime global (`navigator`, `Deno`, `process`, `node:*`) lives in
 * src/platform/ and is reached only through this interface, which the entry points inject. A lint
 * rule (eslint.config.js) fails CI when code elsewhere in src/ reaches for a runtime global.
 */
import type { GpuContext, GpuRequest } from '../gpu/context.ts';

export type RuntimeName = 'node' | 'deno' | 'browser';

/**
 * Durable byte storage addressed by slash-separated relative paths: a directory on disk in
 * Node/Deno, IndexedDB in the browser. Writes are atomic (temp + rename, or one transaction).
 */
export interface FileStore {
  /** Human-readable location, for messages. */
  readonly root: string;
  read(path: string): Promise<Uint8Array>;
  /** Reads `length` bytes at `offset` without loading the whole file. */
  readRange(path: string, offset: number, length: number): Promise<Uint8Array>;
  size(path: string): Promise<number>;
  writeAtomic(path: string, bytes: Uint8Array): Promise<void>;
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
}

/** An append-only file handle. `sync` flushes the data to stable storage before resolving (fsync). */
export interface AppendLog {
  /** Human-readable location, for messages. */
  readonly path: string;
  append(bytes: Uint8Array, options?: { sync?: boolean }): Promise<void>;
  close(): Promise<void>;
}

export interface Platform {
  readonly name: RuntimeName;
  /** Acquire an adapter and device. The returned context owns every native object behind it. */
  acquireGpu(request?: GpuRequest): Promise<GpuContext>;
  /** A file store rooted at `root` (a directory path in Node/Deno, a database name in the browser). */
  files(root: string): FileStore;
  /** Environment variable (Node/Deno) or URL query parameter (browser); undefined when absent. */
  env(name: string): string | undefined;
  /** Command-line arguments after the script (empty in the browser). */
  args(): string[];
  /** Destroy every live GPU device from this platform, then end the process (no-op in browser). */
  exit(code: number): Promise<never>;
}
