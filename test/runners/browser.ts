/**
 * Browser runner: builds test/browser with Vite, serves it on 127.0.0.1 (fixtures under /fixtures/,
 * with HEAD and byte ranges; see MOUNTS), and drives headless Chromium (Debian's /usr/bin/chromium,
 * or $CHROMIUM) with WebGPU on the software Vulkan adapter through Playwright. Every test line from
 * the page is relayed to stdout.
 *
 *   tsx test/runners/browser.ts [filter]        (SPECLAB_DEFAULT_LIMITS=1: the page's device at WebGPU's default limits; SPECLAB_FEATURE_LEVEL=compatibility: in compatibility mode)
 */
import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';
import process from 'node:process';
import { chromium } from 'playwright-core';
import { CHROMIUM_PATH, CHROMIUM_WEBGPU_FLAGS } from './chromium-flags.ts';
import { build } from 'vite';

const root = resolve(import.meta.dirname, '../..');
// One output folder per run: concurrent runs must not empty each other's build.
const outDir = join(root, `dist/test-browser-${process.pid}`);
const fixturesDir = resolve(process.env.SPECLAB_FIXTURES ?? join(root, '../shared/fixtures'));
const filter = process.argv[2];

const TYPES: Record<string, string> = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.safetensors': 'application/octet-stream',
};

await build({
  root: join(root, 'test/browser'),
  logLevel: 'warn',
  build: { outDir, emptyOutDir: true, target: 'es2022', minify: false, sourcemap: false },
});

/**
 * What the tiny static server serves besides the built page: the fixtures (with HEAD and single
 * byte ranges, like a CDN or the Hugging Face hub), the same fixtures from a server that ignores
 * Range (like `python -m http.server`), and the repository's assets/ (the lab target).
 */
const MOUNTS: readonly { prefix: string; dir: string; ranges: boolean }[] = [
  { prefix: '/fixtures/', dir: fixturesDir, ranges: true },
  { prefix: '/fixtures-no-range/', dir: fixturesDir, ranges: false },
  { prefix: '/repo-assets/', dir: join(root, 'assets'), ranges: true }, // not /assets/: Vite's build output
];

/** One `bytes=FIRST-LAST`, `bytes=FIRST-` or `bytes=-SUFFIX` range; 'unsatisfiable', or undefined to send it all. */
function parseRange(header: string | undefined, size: number): { start: number; end: number } | 'unsatisfiable' | undefined {
  const m = header === undefined ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined; // several ranges or junk: a 200 is allowed
  if (m[1] === '') {
    const suffix = Number(m[2]);
    return suffix === 0 || size === 0 ? 'unsatisfiable' : { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  return start >= size || end < start ? 'unsatisfiable' : { start, end };
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const mount = MOUNTS.find((m) => url.pathname.startsWith(m.prefix));
  const base = mount?.dir ?? outDir;
  const rel = mount ? url.pathname.slice(mount.prefix.length) : url.pathname.slice(1) || 'index.html';
  const path = normalize(join(base, decodeURIComponent(rel)));
  if (!path.startsWith(base)) {
    res.writeHead(403).end();
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD' }).end();
    return;
  }
  let size: number;
  try {
    const info = await stat(path);
    if (!info.isFile()) throw new Error('not a file');
    size = info.size;
  } catch {
    res.writeHead(404).end();
    return;
  }
  const headers: Record<string, string | number> = { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' };
  if (mount?.ranges) headers['accept-ranges'] = 'bytes';
  const range = mount?.ranges ? parseRange(req.headers.range, size) : undefined;
  if (range === 'unsatisfiable') {
    res.writeHead(416, { ...headers, 'content-range': `bytes */${size}` }).end();
    return;
  }
  const { start, end } = range ?? { start: 0, end: size - 1 };
  if (range) headers['content-range'] = `bytes ${start}-${end}/${size}`;
  res.writeHead(range ? 206 : 200, { ...headers, 'content-length': end - start + 1 });
  if (req.method === 'HEAD' || size === 0) {
    res.end();
    return;
  }
  createReadStream(path, { start, end })
    .on('error', () => res.destroy())
    .pipe(res);
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
const port = (server.address() as { port: number }).port;

const browser = await chromium.launch({
  executablePath: CHROMIUM_PATH,
  headless: true,
  args: CHROMIUM_WEBGPU_FLAGS,
});
async function runPage(): Promise<{ passed: number; failed: number }> {
  try {
    const page = await browser.newPage();
    page.on('console', (msg) => {
      if (msg.text().startsWith('[browser]')) console.log(msg.text());
    });
    page.on('pageerror', (err) => console.log(`[browser] page error: ${err.message}`));
    const query = new URLSearchParams();
    if (filter) query.set('filter', filter);
    // WebGPU's default limits and no optional feature for the page's device (src/platform/browser.ts).
    for (const name of ['SPECLAB_DEFAULT_LIMITS', 'SPECLAB_FEATURE_LEVEL']) if (process.env[name]) query.set(name, process.env[name]);
    // A running data-plane gateway for the page's gateway suite (see test/dataplane/browser-gateway.ts).
    const gatewayUrl = process.env.SPECLAB_GATEWAY_URL;
    const gatewayToken = process.env.SPECLAB_GATEWAY_TOKEN;
    if (gatewayUrl || gatewayToken) {
      if (!gatewayUrl || !gatewayToken) throw new Error('set both SPECLAB_GATEWAY_URL and SPECLAB_GATEWAY_TOKEN, or neither');
      if (!/^ws:\/\/127\.0\.0\.1:\d+\/?$/.test(gatewayUrl))
        throw new Error(`SPECLAB_GATEWAY_URL must be ws://127.0.0.1:PORT/ (loopback only), got ${gatewayUrl}`);
      query.set('gateway', gatewayUrl);
      query.set('token', gatewayToken);
    }
    const search = query.toString();
    await page.goto(`http://127.0.0.1:${port}/index.html${search ? `?${search}` : ''}`);
    const handle = await page.waitForFunction(() => (window as unknown as { __speclabSummary?: unknown }).__speclabSummary, undefined, {
      timeout: 45 * 60_000,
      polling: 500,
    });
    return (await handle.jsonValue()) as { passed: number; failed: number };
  } finally {
    await browser.close();
    server.close();
    await rm(outDir, { recursive: true, force: true });
  }
}

const summary = await runPage();
process.exit(summary.failed > 0 || summary.passed === 0 ? 1 : 0);
