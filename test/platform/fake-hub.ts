/**
 * Node-only test helper: a local HTTP server that answers the Hugging Face Hub's routes for model repos
 * held in memory, enough for `@huggingface/hub`'s modelInfo and listFiles and for file downloads:
 *
 *   GET /api/models/ORG/NAME/revision/REV   {"sha": commit}       (REV: a branch, or the commit)
 *   GET /api/models/ORG/NAME/tree/COMMIT    [{type, path, size, oid, lfs?}]
 *   GET /ORG/NAME/resolve/COMMIT/PATH       the bytes; a Range: bytes=N- header gets 206 and the rest
 *
 * A repo may require a token (401 without `Authorization: Bearer <token>`), and one file may be cut:
 * its first full GET sends some bytes, then drops the connection or stalls (for a test to kill the
 * downloading process).
 * It answers CORS as the Hub does (the browser lab calls it from another origin). Every request but a
 * CORS preflight is logged. Imported dynamically by suite files (never at their top); Playwright tests
 * import it directly (they run in Node).
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRepo {
  readonly files: Readonly<Record<string, Uint8Array>>;
  readonly commit: string;
  readonly token?: string;
  /**
   * The first GET of this file without a Range header sends `at` bytes, then drops the connection
   * ('drop'), or holds it open sending nothing more ('stall': a download in progress, for a test to kill).
   */
  readonly cut?: { readonly file: string; readonly at: number; readonly mode?: 'drop' | 'stall' };
}

export interface FakeHub {
  readonly url: string;
  readonly log: string[];
  close(): Promise<void>;
}

/** The blob name the Hub lists: sha256 for LFS files (here every .safetensors), else a git-style sha1. */
export function hubObjectId(path: string, bytes: Uint8Array): { oid: string; lfs?: { oid: string; size: number; pointerSize: number } } {
  const sha1 = createHash('sha1').update(`blob ${bytes.byteLength}\0`).update(bytes).digest('hex');
  if (!path.endsWith('.safetensors')) return { oid: sha1 };
  return { oid: sha1, lfs: { oid: createHash('sha256').update(bytes).digest('hex'), size: bytes.byteLength, pointerSize: 134 } };
}

export async function startFakeHub(repos: Readonly<Record<string, FakeRepo>>): Promise<FakeHub> {
  const log: string[] = [];
  const cutDone = new Set<string>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://hub');
    const range = req.headers.range;
    if (req.method !== 'OPTIONS') log.push(`${req.method} ${url.pathname}${range ? ` ${range}` : ''}`);
    // CORS as the Hub sends it, so the browser lab (another origin) can call this server too.
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('access-control-expose-headers', 'content-range, content-length, x-request-id');
    if (req.method === 'OPTIONS') {
      res.writeHead(204, {
        'access-control-allow-headers': 'authorization, range, content-type',
        'access-control-allow-methods': 'GET, HEAD',
      });
      res.end();
      return;
    }
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const api = /^\/api\/models\/([^/]+\/[^/]+)\/(revision|tree)\/([^/]+)/.exec(url.pathname);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([0-9a-f]{40})\/(.+)$/.exec(url.pathname);
    const name = api?.[1] ?? resolve?.[1];
    const repo = name ? repos[name] : undefined;
    if (!repo) return json(404, { error: 'Repository not found' });
    if (repo.token && req.headers.authorization !== `Bearer ${repo.token}`)
      return json(401, { error: 'Access to this model is restricted' });
    if (api && api[2] === 'revision') return json(200, { id: name, sha: repo.commit });
    if (api && api[2] === 'tree')
      return json(
        200,
        Object.entries(repo.files).map(([path, bytes]) => ({ type: 'file', path, size: bytes.byteLength, ...hubObjectId(path, bytes) })),
      );
    const file = resolve ? repo.files[decodeURIComponent(resolve[3])] : undefined;
    if (!resolve || resolve[2] !== repo.commit || !file) return json(404, { error: 'Entry not found' });
    const from = range ? Number(/^bytes=(\d+)-$/.exec(range)?.[1] ?? 0) : 0;
    const body = file.subarray(from);
    const headers = { 'content-length': String(body.byteLength), 'content-type': 'application/octet-stream' };
    if (range) res.writeHead(206, { ...headers, 'content-range': `bytes ${from}-${file.byteLength - 1}/${file.byteLength}` });
    else res.writeHead(200, headers);
    const key = `${name}/${resolve[3]}`;
    if (!range && repo.cut?.file === resolve[3] && !cutDone.has(key)) {
      cutDone.add(key);
      if (repo.cut.mode === 'stall') res.write(body.subarray(0, repo.cut.at));
      else res.write(body.subarray(0, repo.cut.at), () => res.destroy());
      return;
    }
    res.end(body);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections(); // a stalled download's connection too
      }),
  };
}
