/**
 * Browser runner: builds test/browser with Vite, serves it on 127.0.0.1 (fixtures under /fixtures/),
 * and drives headless Chromium (Debian's /usr/bin/chromium, or $CHROMIUM) with WebGPU on the software
 * Vulkan adapter through Playwright. Every test line from the page is relayed to stdout.
 *
 *   tsx test/runners/browser.ts [filter]
 */
import { createServer } from 'node:http';
import { readFile, rm, stat } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';
import process from 'node:process';
import { chromium } from 'playwright-core';
import { build } from 'vite';

const root = resolve(import.meta.dirname, '../..');
// One output folder per run: concurrent runs must not empty each other's build.
const outDir = join(root, `dist/test-browser-${process.pid}`);
const fixturesDir = resolve(process.env.SPECLAB_FIXTURES ?? join(root, '../shared/fixtures'));
const filter = process.argv[2];

export const CHROMIUM_WEBGPU_FLAGS = [
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader',
  '--disable-vulkan-surface',
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const TYPES: Record<string, string> = {
  '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.wasm': 'application/wasm', '.safetensors': 'application/octet-stream',
};

await build({
  root: join(root, 'test/browser'),
  logLevel: 'warn',
  build: { outDir, emptyOutDir: true, target: 'es2022', minify: false, sourcemap: false },
});

const server = createServer(async (req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const base = url.pathname.startsWith('/fixtures/') ? fixturesDir : outDir;
  const rel = url.pathname.startsWith('/fixtures/') ? url.pathname.slice('/fixtures/'.length) : url.pathname.slice(1) || 'index.html';
  const path = normalize(join(base, decodeURIComponent(rel)));
  if (!path.startsWith(base)) {
    res.writeHead(403).end();
    return;
  }
  try {
    if (!(await stat(path)).isFile()) throw new Error('not a file');
    res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' });
    res.end(await readFile(path));
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
const port = (server.address() as { port: number }).port;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
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
    // A running data-plane gateway for the page's gateway suite (see test/dataplane/browser-gateway.ts).
    const gatewayUrl = process.env.SPECLAB_GATEWAY_URL;
    const gatewayToken = process.env.SPECLAB_GATEWAY_TOKEN;
    if (gatewayUrl || gatewayToken) {
      if (!gatewayUrl || !gatewayToken) throw new Error('set both SPECLAB_GATEWAY_URL and SPECLAB_GATEWAY_TOKEN, or neither');
      if (!/^ws:\/\/127\.0\.0\.1:\d+\/?$/.test(gatewayUrl)) throw new Error(`SPECLAB_GATEWAY_URL must be ws://127.0.0.1:PORT/ (loopback only), got ${gatewayUrl}`);
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
