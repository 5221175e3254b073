/**
 * A read-only FileStore over a Hugging Face model directory served over HTTP (a base URL such as
 * `https://huggingface.co/ORG/NAME/resolve/main`), for the ordinary loaders (`HfCheckpointSource`,
 * `ChatTokenizer.load`): sizes come from HEAD (or a one-byte Range GET), tensors from HTTP Range
 * requests, so a multi-gigabyte safetensors file is never held whole; a server that ignores Range has
 * its file downloaded once and sliced. A directory cannot be listed over HTTP, so `list` is refused
 * and callers ask for the file names a model directory is known to have (the loaders already do).
 *
 * Apart from the picked-files store (browser-model-files.ts) because the two share only the path
 * rule and the refused writes (read-only-model-store.ts); everything here is about HTTP: ranges,
 * Content-Range, servers without Range or HEAD, CORS, progress.
 */
import type { FileStore } from '../ports/storage.ts';
import { checkSizeWithinBudget, withinBudget, type ReadBudget } from '../ports/read-budget.ts';
import { ReadOnlyModelStore, checkRange, segments } from './read-only-model-store.ts';

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

  async read(path: string, budget?: ReadBudget): Promise<Uint8Array> {
    const { key, url } = this.locate(path);
    const kept = this.whole.get(key);
    if (kept) return withinBudget(url, (await kept).slice(), budget);
    const response = await this.request(url, 'GET');
    if (response.status !== 200) throw this.httpError(url, response, 'reading the file');
    const length = bodyLength(response);
    if (budget && length !== undefined && length > budget.maxBytes) {
      await response.body?.cancel();
      checkSizeWithinBudget(url, length, budget);
    }
    return withinBudget(url, await this.body(key, url, response, length), budget);
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
