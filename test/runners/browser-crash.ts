/**
 * Browser crash test for the IndexedDB metadata store (docs/durability.md §3 durable ack, §5 recovery):
 * builds test/browser-crash with Vite, serves it on 127.0.0.1 and drives headless Chromium (Debian's
 * /usr/bin/chromium, or $CHROMIUM) through Playwright in ONE persistent browser context.
 *
 * Per scenario: page 1 runs a train loop (commit, lease, durable acks) against a fresh IndexedDB
 * database and reports; the driver then closes the tab (`page.close()`) or crashes its renderer
 * (CDP `Page.crash`) while the loop may still be writing; page 2, a new tab in the same context,
 * reopens the database by name, runs reconcileOnRestart and reports a verdict per check. The
 * driver adds its own cross-checks (the tab really went away; every ack page 1 saw resolve landed).
 *
 *   tsx test/runners/browser-crash.ts [filter]
 *
 * Prints `[browser] ok …` / `[browser] FAIL …` lines and `N passed, N failed`; exits non-zero on any
 * failure.
 */
import { createServer } from 'node:http';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { extname, join, normalize, resolve } from 'node:path';
import process from 'node:process';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { build } from 'vite';
import type { Phase1Report, Verdict } from '../browser-crash/main.ts';

const root = resolve(import.meta.dirname, '../..');
const outDir = join(root, 'dist/test-browser-crash');
const filter = process.argv[2];

interface Scenario {
  name: string;
  n: number;
  batch: number;
  /** Durable acks page 1 completes before it reports. */
  ackBefore: number;
  /** Acked steps the loop would reach if the tab lived on. */
  ackTotal: number;
  gapMs: number;
  /** How the tab goes away, and how long after page 1 reported. */
  kill: 'close' | 'crash';
  killAfterMs: number;
}

const SCENARIOS: Scenario[] = [
  {
    name: 'tab closed before any ack: every committed sample requeued',
    n: 12,
    batch: 4,
    ackBefore: 0,
    ackTotal: 0,
    gapMs: 0,
    kill: 'close',
    killAfterMs: 0,
  },
  {
    name: 'tab closed after durable acks of steps 1-2: those released, the in-progress step requeued',
    n: 12,
    batch: 4,
    ackBefore: 2,
    ackTotal: 2,
    gapMs: 0,
    kill: 'close',
    killAfterMs: 0,
  },
  {
    name: 'tab closed while acks are being written',
    n: 96,
    batch: 4,
    ackBefore: 2,
    ackTotal: 20,
    gapMs: 2,
    kill: 'close',
    killAfterMs: 25,
  },
  {
    name: 'renderer crashed while acks are being written',
    n: 96,
    batch: 4,
    ackBefore: 2,
    ackTotal: 20,
    gapMs: 2,
    kill: 'crash',
    killAfterMs: 25,
  },
];

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json' };

let passed = 0;
let failed = 0;
const failures: string[] = [];
function report(name: string, ok: boolean, detail = ''): void {
  if (ok) {
    passed++;
    console.log(`[browser] ok   ${name}${detail ? ` ${detail}` : ''}`);
  } else {
    failed++;
    failures.push(`${name}: ${detail}`);
    console.log(`[browser] FAIL ${name}: ${detail}`);
  }
}

await build({
  root: join(root, 'test/browser-crash'),
  logLevel: 'warn',
  build: { outDir, emptyOutDir: true, target: 'es2022', minify: false, sourcemap: false },
});

const server = createServer(async (req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const path = normalize(join(outDir, decodeURIComponent(url.pathname.slice(1) || 'index.html')));
  if (!path.startsWith(outDir)) {
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
const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

const userDataDir = await mkdtemp(join(tmpdir(), 'speclab-browser-crash-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

/** Opens a tab on the crash page and waits for `key` on window (or the page's own error). */
async function openPhase<T>(
  ctx: BrowserContext,
  query: URLSearchParams,
  key: string,
  onLine: (line: string) => void,
): Promise<{ page: Page; value: T }> {
  const page = await ctx.newPage();
  page.on('console', (msg) => onLine(msg.text()));
  page.on('pageerror', (err) => onLine(`[crash-error] page error: ${err.message}`));
  await page.goto(`${origin}/index.html?${query}`);
  const handle = await page.waitForFunction(
    (k) => {
      const w = window as unknown as Record<string, unknown>;
      return w[k] !== undefined ? { value: w[k] } : w.__crashError !== undefined ? { error: w.__crashError } : undefined;
    },
    key,
    { timeout: 120_000, polling: 10 },
  );
  const result = (await handle.jsonValue()) as { value?: T; error?: string };
  if (result.error !== undefined) throw new Error(`${query.get('phase')} phase failed in the page: ${result.error}`);
  return { page, value: result.value as T };
}

async function runScenario(scenario: Scenario, index: number): Promise<void> {
  const prefix = `crash/indexeddb › ${scenario.name}`;
  const query = new URLSearchParams({
    db: `speclab-crash-test-${index}-${Date.now().toString(36)}`,
    n: String(scenario.n),
    batch: String(scenario.batch),
    ackBefore: String(scenario.ackBefore),
    ackTotal: String(scenario.ackTotal),
    gapMs: String(scenario.gapMs),
  });
  const resolvedAcks: number[] = [];
  const pageErrors: string[] = [];
  const onLine = (line: string): void => {
    const ack = /^\[crash-phase1\] ack-durable (\d+)$/.exec(line);
    if (ack) resolvedAcks.push(Number(ack[1]));
    if (line.startsWith('[crash-error]')) pageErrors.push(line);
  };

  // Phase 1: train, then the tab goes away with the store still open.
  query.set('phase', 'train');
  const { page: first, value: phase1 } = await openPhase<Phase1Report>(context, query, '__phase1', onLine);
  report(
    `${prefix} › phase 1 committed ${scenario.n} refs and acked ${scenario.ackBefore} steps durably`,
    phase1.committed.length === scenario.n && phase1.durableSteps === scenario.ackBefore,
    JSON.stringify({ committed: phase1.committed.length, durableSteps: phase1.durableSteps, inFlight: phase1.queueInFlight }),
  );
  if (scenario.killAfterMs > 0) await new Promise((r) => setTimeout(r, scenario.killAfterMs));
  if (scenario.kill === 'close') {
    await first.close();
  } else {
    const cdp = await context.newCDPSession(first);
    const crashed = first.waitForEvent('crash', { timeout: 30_000 });
    cdp.send('Page.crash').catch(() => {}); // never answers: the renderer is gone
    await crashed;
    await first.close();
  }
  const seenBeforeKill = Math.max(0, ...resolvedAcks);
  report(
    `${prefix} › tab 1 is gone (${scenario.kill === 'close' ? 'page.close()' : 'renderer crashed'})`,
    first.isClosed() && !context.pages().includes(first),
    `${context.pages().length} page(s) open`,
  );

  // Phase 2: a new tab in the same browser context reopens the database by name.
  query.set('phase', 'recover');
  const { page: second, value: verdict } = await openPhase<Verdict>(context, query, '__verdict', onLine);
  await second.close();
  const summary = JSON.stringify({
    landedSteps: verdict.landedSteps,
    checkpointStep: verdict.checkpointStep,
    released: verdict.released,
    requeued: verdict.requeued,
    acksSeenResolved: seenBeforeKill,
  });
  for (const check of verdict.checks) report(`${prefix} › ${check.name}`, check.ok, check.ok ? '' : check.error);
  report(`${prefix} › every ack page 1 saw resolve before the tab went away is durable`, verdict.landedSteps >= seenBeforeKill, summary);
  report(`${prefix} › no page errors`, pageErrors.length === 0, pageErrors.join(' | '));
}

try {
  for (const [i, scenario] of SCENARIOS.entries()) {
    if (filter && !`crash/indexeddb › ${scenario.name}`.includes(filter)) continue;
    try {
      await runScenario(scenario, i);
    } catch (err) {
      report(`crash/indexeddb › ${scenario.name}`, false, err instanceof Error ? err.message : String(err));
    }
  }
} finally {
  await context.close();
  server.close();
  await rm(userDataDir, { recursive: true, force: true });
}
if (passed + failed === 0) console.log(`[browser] no scenario matched "${filter}"`);
for (const f of failures) console.log(`[browser] failed: ${f}`);
console.log(`[browser] ${passed} passed, ${failed} failed`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
