/* eslint-disable max-lines -- longer than 400 lines: the picked, dropped and URL stores share one read side and one set of refusals, which a split would scatter. */
/**
 * Read-only FileStores over a Hugging Face model directory that the browser did not write itself:
 * files the user picked (`<input type=file multiple webkitdirectory>`) or dropped, and a directory
 * served over HTTP (a base URL such as `https://huggingface.co/ORG/NAME/resolve/main`).
 *
 * Both plug into the ordinary loaders (`loadHfCheckpoint`, `ChatTokenizer.load`), which read through
 * `FileStore` tensor by tensor with `readRange`: a picked file is sliced (`File.slice`), a URL is
 * read with HTTP Range requests, so neither ever holds a whole multi-gigabyte safetensors file.
 *
 * Writes are refused: these stores describe someone else's files. `list` works for picked files;
 * over HTTP a directory cannot be listed, so the URL store refuses it and callers ask for the file
 * names a model directory is known to have (the loaders already do: config.json, then
 * model.safetensors or model.safetensors.index.json and the shards it names, tokenizer.json,
 * tokenizer_config.json).
 */
import type { AppendLog, FileStore } from '../ports/storage.ts';

/** A picked file and its slash-separated path inside the picked directory. */
export interface PickedFile {
  readonly file: File;
  readonly path: string;
}

export interface PickedFilesOptions {
  /** The store's `root`, shown in messages; default: the picked folder's name, else "picked files". */
  readonly label?: string;
}

/** Splits a relative path into segments, refusing ".." so a path cannot leave the directory. */
function segments(path: string, where: string): string[] {
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new Error(`${where}: path "${path}" leaves the model directory ("..")`);
  return parts;
}

function readOnly(root: string, path: string, operation: string): Promise<never> {
  return Promise.reject(new Error(`${root}/${path}: cannot ${operation}: ${root} is a read-only store of model files`));
}

/** The write side shared by the picked-files and URL stores: every write is refused, naming the path. */
abstract class ReadOnlyModelStore implements FileStore {
  abstract readonly root: string;
  abstract read(path: string): Promise<Uint8Array>;
  abstract readRange(path: string, offset: number, length: number): Promise<Uint8Array>;
  abstract size(path: string): Promise<number>;
  abstract exists(path: string): Promise<boolean>;
  abstract list(dir: string): Promise<string[]>;

  writeAtomic(path: string): Promise<void> {
    return readOnly(this.root, path, 'write');
  }
  remove(path: string): Promise<void> {
    return readOnly(this.root, path, 'remove');
  }
  openAppendLog(path: string): Promise<AppendLog> {
    return readOnly(this.root, path, 'append');
  }
}

/**
 * Where a picked File lives inside the picked directory: `webkitRelativePath` without its first
 * segment (the folder the user chose, whose name becomes the store label), else the bare name.
 */
function pickedPath(file: File): { path: string; folder?: string } {
  const relative = file.webkitRelativePath ?? '';
  if (relative === '') return { path: file.name };
  const [folder, ...rest] = relative.split('/');
  return rest.length === 0 ? { path: relative } : { path: rest.join('/'), folder };
}

class PickedFilesStore extends ReadOnlyModelStore {
  readonly root: string;
  private readonly byPath = new Map<string, File>();

  constructor(entries: readonly PickedFile[], label: string) {
    super();
    this.root = label;
    for (const { file, path } of entries) {
      const key = segments(path, label).join('/');
      if (key === '') throw new Error(`${label}: picked file "${file.name}" has an empty path`);
      if (this.byPath.has(key)) throw new Error(`${label}: two picked files have the path "${key}"`);
      this.byPath.set(key, file);
    }
  }

  private file(path: string): File {
    const file = this.byPath.get(segments(path, this.root).join('/'));
    if (file) return file;
    const picked = [...this.byPath.keys()].sort();
    const shown = picked.length > 12 ? `${picked.slice(0, 12).join(', ')}, … (${picked.length} files)` : picked.join(', ') || 'none';
    throw new Error(`${this.root}/${path}: not among the picked files (picked: ${shown})`);
  }

  async read(path: string): Promise<Uint8Array> {
    return new Uint8Array(await this.file(path).arrayBuffer());
  }

  async readRange(path: string, offset: number, length: number): Promise<Uint8Array> {
    const file = this.file(path);
    checkRange(`${this.root}/${path}`, offset, length);
    if (offset + length > file.size) {
      throw new Error(`${this.root}/${path}: wanted ${length} bytes at offset ${offset}, file has ${file.size}`);
    }
    return new Uint8Array(await file.slice(offset, offset + length).arrayBuffer());
  }

  async size(path: string): Promise<number> {
    return this.file(path).size;
  }

  async exists(path: string): Promise<boolean> {
    return this.byPath.has(segments(path, this.root).join('/'));
  }

  async list(dir: string): Promise<string[]> {
    const prefix = segments(dir, this.root).join('/');
    const names = new Set<string>();
    for (const key of this.byPath.keys()) {
      if (prefix === '') names.add(key.split('/')[0]);
      else if (key.startsWith(`${prefix}/`)) names.add(key.slice(prefix.length + 1).split('/')[0]);
    }
    return [...names].sort();
  }
}

function isPickedFile(x: File | PickedFile): x is PickedFile {
  return !(x instanceof File);
}

/**
 * Picked files with explicit paths and the name of the folder they came from: plain data that a
 * page can post to a worker (a File survives postMessage; a FileStore does not), where
 * `pickedFilesStore(files, { label: folder })` makes the store.
 */
export interface PickedDirectory {
  readonly files: readonly PickedFile[];
  /** The chosen or dropped folder (stripped from the paths), when there was exactly one. */
  readonly folder?: string;
}

/**
 * Paths for picked files: a FileList from `<input type=file multiple webkitdirectory>` gets them
 * from `webkitRelativePath` with the chosen folder stripped; plain Files get their names;
 * `{ file, path }` pairs keep theirs.
 */
export function pickedDirectory(files: FileList | Iterable<File | PickedFile>): PickedDirectory {
  const entries: PickedFile[] = [];
  const folders = new Set<string>();
  for (const item of Array.from(files as Iterable<File | PickedFile>)) {
    if (isPickedFile(item)) {
      entries.push(item);
      continue;
    }
    const { path, folder } = pickedPath(item);
    if (folder !== undefined) folders.add(folder);
    entries.push({ file: item, path });
  }
  return { files: entries, folder: folders.size === 1 ? [...folders][0] : undefined };
}

/** A read-only FileStore over picked files, with paths as `pickedDirectory` gives them. */
export function pickedFilesStore(files: FileList | Iterable<File | PickedFile>, options: PickedFilesOptions = {}): FileStore {
  const dir = pickedDirectory(files);
  return new PickedFilesStore(dir.files, options.label ?? dir.folder ?? 'picked files');
}

/** `FileSystemEntry` walking: a dropped folder arrives as entries, read in batches. */
async function readDirectory(dir: FileSystemDirectoryEntry): Promise<FileSystemEntry[]> {
  const reader = dir.createReader();
  const all: FileSystemEntry[] = [];
  for (;;) {
    // readEntries hands out at most ~100 entries per call; an empty batch means the end.
    const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
    if (batch.length === 0) return all;
    all.push(...batch);
  }
}

async function walk(entry: FileSystemEntry, path: string, out: PickedFile[]): Promise<void> {
  if (entry.isFile) {
    const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
    out.push({ file, path });
  } else if (entry.isDirectory) {
    for (const child of await readDirectory(entry as FileSystemDirectoryEntry)) await walk(child, `${path}/${child.name}`, out);
  }
}

/**
 * What was dropped on the page, as picked files. Call it synchronously inside the `drop` handler
 * (before any `await`): the browser empties `dataTransfer` when the handler returns, so the items
 * are captured first and walked afterwards. A single dropped folder becomes the root (and the
 * `folder`), like a picked folder; dropped loose files are found by their names.
 */
export function droppedDirectory(dataTransfer: DataTransfer): Promise<PickedDirectory> {
  const captured = Array.from(dataTransfer.items)
    .filter((item) => item.kind === 'file')
    .map((item) => ({ entry: item.webkitGetAsEntry?.() ?? null, file: item.getAsFile() }));
  return (async () => {
    const top = captured.length === 1 && captured[0].entry?.isDirectory ? captured[0].entry : undefined;
    const files: PickedFile[] = [];
    if (top) {
      for (const child of await readDirectory(top as FileSystemDirectoryEntry)) await walk(child, child.name, files);
      return { files, folder: top.name };
    }
    for (const { entry, file } of captured) {
      // Script-made DataTransfers (and some browsers) give no entry: use the File and its name.
      if (entry) await walk(entry, entry.name, files);
      else if (file) files.push({ file, path: file.name });
    }
    return { files };
  })();
}

/** A read-only FileStore over what was dropped; the same synchronous-call rule as `droppedDirectory`. */
export async function droppedFilesStore(dataTransfer: DataTransfer, options: PickedFilesOptions = {}): Promise<FileStore> {
  const dir = await droppedDirectory(dataTransfer);
  return pickedFilesStore(dir.files, { label: options.label ?? dir.folder });
}

// ── HTTP ────────────────────────────────────────────────────────────────────────────────────────

/** One progress report of a URL store: the request in flight, and everything fetched so far. */
export interface UrlFetchProgress {
  readonly path: string;
  readonly url: string;
  /** Body bytes of this request received so far. */
  readonly loaded: number;
  /** Body bytes this request will bring (the range length, or Content-Length); undefined if unknown. */
  readonly total: number | undefined;
  /** Body bytes received by this store over all its requests, monotonic. */
  readonly fetchedBytes: number;
}

export interface UrlStoreOptions {
  /** Called when a response starts (loaded 0) and after every body chunk. */
  onProgress?(progress: UrlFetchProgress): void;
  /** Extra request headers, e.g. `Authorization: Bearer …` for a gated Hugging Face repository. */
  headers?: HeadersInit;
  /** Cancels every request of this store. */
  signal?: AbortSignal;
}

function checkRange(where: string, offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
    throw new Error(`${where}: invalid byte range (offset ${offset}, length ${length})`);
  }
}

function statusText(response: Response): string {
  return `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
}

/** `Content-Range: bytes FIRST-LAST/TOTAL`, or on a 416 a star in place of FIRST-LAST; TOTAL may be a star (unknown). */
function parseContentRange(value: string | null): { first?: number; last?: number; total?: number } | undefined {
  const m = value === null ? null : /^bytes\s+(?:(\d+)-(\d+)|\*)\/(\d+|\*)$/i.exec(value.trim());
  if (!m) return undefined;
  return {
    first: m[1] === undefined ? undefined : Number(m[1]),
    last: m[2] === undefined ? undefined : Number(m[2]),
    total: m[3] === '*' ? undefined : Number(m[3]),
  };
}

/** Content-Length when it counts the bytes the body will yield (not a compressed encoding's). */
function bodyLength(response: Response): number | undefined {
  const encoding = response.headers.get('content-encoding');
  if (encoding && encoding.toLowerCase() !== 'identity') return undefined;
  const value = response.headers.get('content-length');
  return value !== null && /^\d+$/.test(value.trim()) ? Number(value) : undefined;
}

class UrlFileStore extends ReadOnlyModelStore {
  readonly root: string;
  private readonly base: URL;
  private fetched = 0;
  private readonly sizes = new Map<string, number>();
  /** Whole bodies of files whose server ignored Range (answered 200): later ranges are sliced from them. */
  private readonly whole = new Map<string, Promise<Uint8Array>>();

  constructor(
    baseUrl: string,
    private readonly options: UrlStoreOptions,
  ) {
    super();
    // Resolve a relative base ("/models/x") against the page; the trailing slash makes file names
    // resolve inside the directory rather than replacing its last segment.
    try {
      this.base = new URL(baseUrl.replace(/\/*$/, '/'), globalThis.location?.href);
    } catch (err) {
      throw new Error(`urlStore: "${baseUrl}" is not a URL (a relative one needs a page to resolve against)`, { cause: err });
    }
    this.root = this.base.href.replace(/\/$/, '');
  }

  /** The normalized path (the key of the caches) and the file's URL. */
  private locate(path: string): { key: string; url: string } {
    const parts = segments(path, this.root);
    if (parts.length === 0) throw new Error(`${this.root}: empty file path`);
    return { key: parts.join('/'), url: new URL(parts.map(encodeURIComponent).join('/'), this.base).href };
  }

  private async request(url: string, method: 'GET' | 'HEAD', range?: string): Promise<Response> {
    const headers = new Headers(this.options.headers);
    if (range) headers.set('Range', range);
    try {
      return await fetch(url, { method, headers, signal: this.options.signal });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      // A network failure or a cross-origin server without CORS headers: fetch says only "Failed to fetch".
      throw new Error(
        `${url}: ${method} failed (${(err as Error).message}); is the server up, and does it allow cross-origin requests (CORS)?`,
        { cause: err },
      );
    }
  }

  private httpError(url: string, response: Response, doing: string): Error {
    const hint = response.status === 401 || response.status === 403 ? ' (a gated or private repository needs an Authorization header)' : '';
    return new Error(`${url}: ${statusText(response)} while ${doing}${hint}`);
  }

  /** Reads a response body, reporting progress; `expected` (when known) must be met exactly. */
  private async body(path: string, url: string, response: Response, expected: number | undefined): Promise<Uint8Array> {
    const report = (loaded: number): void => this.options.onProgress?.({ path, url, loaded, total: expected, fetchedBytes: this.fetched });
    report(0);
    const chunks: Uint8Array[] = [];
    let loaded = 0;
    if (response.body) {
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        loaded += value.length;
        if (expected !== undefined && loaded > expected) {
          await reader.cancel();
          throw new Error(`${url}: body is longer than the ${expected} bytes announced`);
        }
        chunks.push(value);
        this.fetched += value.length;
        report(loaded);
      }
    }
    if (expected !== undefined && loaded !== expected) throw new Error(`${url}: body ended after ${loaded} of ${expected} bytes`);
    if (chunks.length === 1) return chunks[0];
    const out = new Uint8Array(loaded);
    let at = 0;
    for (const c of chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }

  /** The whole file from a 200 response (a server without Range support), kept for later ranges. */
  private keepWhole(key: string, url: string, response: Response): Promise<Uint8Array> {
    const bytes = this.body(key, url, response, bodyLength(response));
    this.whole.set(key, bytes);
    bytes.then(
      (b) => this.sizes.set(key, b.length),
      () => this.whole.delete(key), // a failed download is not kept; the error reaches the caller
    );
    return bytes;
  }

  async read(path: string): Promise<Uint8Array> {
    const { key, url } = this.locate(path);
    const kept = this.whole.get(key);
    if (kept) return (await kept).slice();
    const response = await this.request(url, 'GET');
    if (response.status !== 200) throw this.httpError(url, response, 'reading the file');
    return this.body(key, url, response, bodyLength(response));
  }

  async readRange(path: string, offset: number, length: number): Promise<Uint8Array> {
    const { key, url } = this.locate(path);
    checkRange(url, offset, length);
    const kept = this.whole.get(key);
    if (kept) return sliceWhole(url, await kept, offset, length);
    if (length === 0) return new Uint8Array(0); // "bytes=N-(N-1)" is not a valid range
    const last = offset + length - 1;
    const response = await this.request(url, 'GET', `bytes=${offset}-${last}`);
    if (response.status === 206) {
      // Content-Range is readable same-origin, or cross-origin when the server exposes it; the
      // body length is checked either way.
      const got = parseContentRange(response.headers.get('content-range'));
      if (got && (got.first !== offset || got.last !== last)) {
        await response.body?.cancel();
        throw new Error(`${url}: asked for bytes ${offset}-${last}, server sent ${response.headers.get('content-range')}`);
      }
      return this.body(key, url, response, length);
    }
    if (response.status === 200) {
      // The server ignored Range and sends the whole file (e.g. a plain static server). Slicing it
      // is correct; keeping it spares downloading it again for every later tensor.
      return sliceWhole(url, await this.keepWhole(key, url, response), offset, length);
    }
    if (response.status === 416) {
      const total = parseContentRange(response.headers.get('content-range'))?.total;
      throw new Error(
        `${url}: ${statusText(response)}: wanted bytes ${offset}-${last}${total === undefined ? '' : ` of a ${total}-byte file`}`,
      );
    }
    throw this.httpError(url, response, `reading bytes ${offset}-${last}`);
  }

  async size(path: string): Promise<number> {
    const { key, url } = this.locate(path);
    const known = this.sizes.get(key);
    if (known !== undefined) return known;
    const head = await this.request(url, 'HEAD');
    const fromHead = head.status === 200 ? bodyLength(head) : undefined;
    if (fromHead !== undefined) {
      this.sizes.set(key, fromHead);
      return fromHead;
    }
    if (head.status !== 200 && head.status !== 405 && head.status !== 501)
      throw this.httpError(url, head, 'asking for the file size (HEAD)');
    // No usable HEAD: ask for the first byte; a 206's Content-Range carries the total.
    const probe = await this.request(url, 'GET', 'bytes=0-0');
    if (probe.status === 206) {
      const total = parseContentRange(probe.headers.get('content-range'))?.total;
      await probe.body?.cancel();
      if (total === undefined)
        throw new Error(
          `${url}: the server answers ranges but its Content-Range gives no total size (cross-origin servers must expose Content-Range)`,
        );
      this.sizes.set(key, total);
      return total;
    }
    if (probe.status === 200) return (await this.keepWhole(key, url, probe)).length;
    if (probe.status === 416) {
      await probe.body?.cancel();
      const total = parseContentRange(probe.headers.get('content-range'))?.total;
      if (total === 0) return 0; // an empty file has no first byte
    }
    throw this.httpError(url, probe, 'asking for the file size (GET bytes=0-0)');
  }

  async exists(path: string): Promise<boolean> {
    const { key, url } = this.locate(path);
    if (this.sizes.has(key) || this.whole.has(key)) return true;
    const head = await this.request(url, 'HEAD');
    if (head.status === 200) {
      const length = bodyLength(head);
      if (length !== undefined) this.sizes.set(key, length);
      return true;
    }
    if (head.status === 404 || head.status === 410) return false;
    if (head.status === 405 || head.status === 501) {
      // HEAD not allowed: a one-byte range answers the same question.
      const probe = await this.request(url, 'GET', 'bytes=0-0');
      await probe.body?.cancel();
      if (probe.status === 200 || probe.status === 206 || probe.status === 416) return true;
      if (probe.status === 404 || probe.status === 410) return false;
      throw this.httpError(url, probe, 'checking that the file exists (GET bytes=0-0)');
    }
    throw this.httpError(url, head, 'checking that the file exists (HEAD)');
  }

  async list(dir: string): Promise<string[]> {
    throw new Error(
      `${this.root}/${dir}: a directory cannot be listed over HTTP; read the files a model directory is known to have (config.json, model.safetensors or model.safetensors.index.json and its shards, tokenizer.json, tokenizer_config.json)`,
    );
  }
}

function sliceWhole(url: string, bytes: Uint8Array, offset: number, length: number): Uint8Array {
  if (offset + length > bytes.length) throw new Error(`${url}: wanted ${length} bytes at offset ${offset}, file has ${bytes.length}`);
  return bytes.slice(offset, offset + length);
}

/**
 * A read-only FileStore over a model directory served at `baseUrl` (absolute, or relative to the
 * page). Sizes come from HEAD (or a one-byte Range GET), ranges from HTTP Range requests; a server
 * that ignores Range has its file downloaded once and sliced. Errors name the URL and HTTP status.
 */
export function urlStore(baseUrl: string, options: UrlStoreOptions = {}): FileStore {
  return new UrlFileStore(baseUrl, options);
}
