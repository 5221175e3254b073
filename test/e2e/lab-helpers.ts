/**
 * Shared helpers of the lab's end-to-end tests (lab*.spec.ts): reading the page's UI contract
 * (`#status` and its data attributes), waiting for phases, settings, screenshots at 1280 and 390 px,
 * the console watch (any console error or page error fails a test), axe-core checks and keyboard
 * navigation.
 */
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import AxeBuilder from '@axe-core/playwright';
import { expect, type Page, type TestInfo } from '@playwright/test';

export const MINUTE = 60_000;
/** Target generation (rollouts) plus training steps on the software adapter of a 2-core machine. */
export const TRAIN_TIMEOUT = 5 * MINUTE;

export type Phase = 'idle' | 'loading' | 'data' | 'training' | 'paused' | 'stopped' | 'done' | 'error';

/** Small settings: 8 prompts × 4 epochs / batch 4 = 8 optimizer steps. */
export const SMALL = {
  'train-prompts': 8,
  'response-length': 16,
  epochs: 4,
  'batch-size': 4,
  'ttt-length': 3,
  'rollout-workers': 2,
} as const;
export type Settings = Record<keyof typeof SMALL, number>;

export const CHARTS = [
  'chart-loss',
  'chart-acc',
  'chart-acceptance',
  'chart-eval',
  'chart-accept-rate',
  'chart-throughput',
  'chart-queue',
  'chart-store',
  'chart-lifecycle',
] as const;

export interface Status {
  phase: string;
  step: number;
  total: number;
  loss: number;
  firstLoss: number;
  acked: number;
  committed: number;
  resumable: boolean;
  text: string;
}

export async function readStatus(page: Page): Promise<Status> {
  const { data: d, content } = await page
    .locator('#status')
    .evaluate((el: HTMLElement) => ({ data: { ...el.dataset } as Record<string, string>, content: el.textContent ?? '' }));
  const num = (v: string | undefined): number => (v === undefined || v === '' ? NaN : Number(v));
  return {
    phase: d.phase ?? '',
    step: num(d.step),
    total: num(d.total),
    loss: num(d.loss),
    firstLoss: num(d.firstLoss),
    acked: num(d.acked),
    committed: num(d.committed),
    resumable: d.resumable === 'true',
    text: content.trim(),
  };
}

/** The page's own words when something went wrong: status, run detail, model status, GPU error. */
export async function pageDiagnosis(page: Page): Promise<string> {
  const text = async (selector: string): Promise<string> => {
    const el = page.locator(selector);
    if ((await el.count().catch(() => 0)) === 0) return '';
    return (
      (await el
        .first()
        .textContent()
        .catch(() => '')) ?? ''
    ).trim();
  };
  const gpuShown = await page
    .locator('#gpu-error')
    .isVisible()
    .catch(() => false);
  return [
    `#status: ${(await text('#status')) || '(empty)'}`,
    `#model-status: ${(await text('#model-status')) || '(empty)'}`,
    (await text('#run-detail')) ? `detail: ${await text('#run-detail')}` : '',
    gpuShown ? `#gpu-error: ${await text('#gpu-error')}` : '',
  ]
    .filter(Boolean)
    .join('; ');
}

/**
 * Waits until `#status` reaches one of `wanted` (or `error`, which fails at once with the page's
 * message instead of waiting out the timeout), and returns the status then.
 */
export async function waitForPhase(page: Page, wanted: readonly Phase[], timeout: number): Promise<Status> {
  await page.waitForFunction(
    (phases) => {
      const phase = document.querySelector<HTMLElement>('#status')?.dataset.phase;
      return phase !== undefined && (phases.includes(phase) || phase === 'error');
    },
    [...wanted] as string[],
    { timeout, polling: 250 },
  );
  const status = await readStatus(page);
  expect(
    wanted as readonly string[],
    `#status data-phase is "${status.phase}", wanted ${wanted.join(' | ')}; ${await pageDiagnosis(page)}`,
  ).toContain(status.phase);
  return status;
}

/** Opens the lab and waits until it has settled. */
export async function openLab(page: Page): Promise<Status> {
  await page.goto('/');
  return settle(page);
}

/**
 * Waits until the loaded lab has settled: a phase other than `loading`, the lab target loaded
 * (`#model-status` ready) and `#start` enabled (start, or continue a saved run).
 */
export async function settle(page: Page): Promise<Status> {
  await expect(page.locator('#status')).toBeAttached();
  try {
    await expect(page.locator('#gpu-error'), 'WebGPU should be available (SwiftShader)').toBeHidden();
    await expect(page.locator('#model-status'), 'the lab target loads').toHaveAttribute('data-state', /^(ready|error)$/, {
      timeout: 3 * MINUTE,
    });
    await expect(page.locator('#model-status'), 'the lab target loads').toHaveAttribute('data-state', 'ready', { timeout: 1000 });
    await expect(page.locator('#start'), '#start becomes enabled').toBeEnabled({ timeout: MINUTE });
    await expect(page.locator('#gpu-error'), 'WebGPU should be available (SwiftShader)').toBeHidden();
  } catch (err) {
    throw new Error(`the lab did not become ready: ${(err as Error).message.split('\n')[0]}; ${await pageDiagnosis(page)}`, { cause: err });
  }
  const status = await readStatus(page);
  expect(status.phase, `the lab settled in phase "${status.phase}"; ${await pageDiagnosis(page)}`).not.toMatch(/^(loading|error)$/);
  return status;
}

/** Starts from a clean slate: discards a saved run if the page reports one. */
export async function discardSavedRun(page: Page): Promise<void> {
  if ((await readStatus(page)).resumable) {
    await page.locator('#discard').click();
    await expect(page.locator('#status')).not.toHaveAttribute('data-resumable', 'true');
  }
}

export async function applySettings(page: Page, settings: Settings): Promise<void> {
  for (const [id, value] of Object.entries(settings)) {
    const input = page.locator(`#${id}`);
    await expect(input, `settings input #${id}`).toBeEditable();
    await input.fill(String(value));
    await expect(input).toHaveValue(String(value));
  }
}

/** Saves a full-page screenshot into the test's output folder (test-results/e2e/…/NAME.png). */
export async function snap(page: Page, testInfo: TestInfo, name: string): Promise<void> {
  await page.screenshot({ path: testInfo.outputPath(`${name}.png`), fullPage: true });
}

/**
 * Screenshots at 1280 and 390 px wide (NAME-1280.png, NAME-390.png), the viewport restored after.
 * With `docs` and SPECLAB_E2E_DOCS=1 they also become the README's docs/lab-1280.png and
 * docs/lab-390.png, clipped to the top of the page so the files stay small (CI leaves docs/ alone).
 */
export async function snapWidths(page: Page, testInfo: TestInfo, name: string, docs = false): Promise<void> {
  const before = page.viewportSize() ?? { width: 1280, height: 900 };
  try {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
      const path = testInfo.outputPath(`${name}-${width}.png`);
      await page.screenshot({ path, fullPage: true });
      if (docs && process.env.SPECLAB_E2E_DOCS === '1') {
        const height = await page.evaluate(() => document.documentElement.scrollHeight);
        const doc = fileURLToPath(new URL(`../../docs/lab-${width}.png`, import.meta.url));
        await mkdir(dirname(doc), { recursive: true });
        await page.screenshot({
          path: doc,
          fullPage: true,
          clip: { x: 0, y: 0, width, height: Math.min(height, width === 1280 ? 1500 : 2400) },
          scale: 'css',
        });
      }
    }
  } finally {
    await page.setViewportSize(before);
  }
}

/** No horizontal scrolling at the current width (390 px: the page must fit a phone). */
export async function expectNoHorizontalScroll(page: Page, width: number): Promise<void> {
  const scrollWidth = await page.evaluate(() => document.scrollingElement!.scrollWidth);
  expect(scrollWidth, `document.scrollingElement.scrollWidth at ${width} px`).toBeLessThanOrEqual(width);
}

/** An axe-core check of the page: no serious or critical violations. */
export async function expectAccessible(page: Page, when: string): Promise<void> {
  const results = await new AxeBuilder({ page }).analyze();
  const bad = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const text = bad
    .map(
      (v) =>
        `${v.id} (${v.impact}): ${v.help} — ${v.nodes
          .slice(0, 3)
          .map((n) => n.target.join(' '))
          .join('; ')}`,
    )
    .join('\n');
  expect(bad.length, `axe ${when}: serious or critical violations\n${text}`).toBe(0);
}

/**
 * Presses Tab (at most `limit` times) until `#id` has the focus, so a test reaches a control as a
 * keyboard user does, and checks that the focused control shows a focus outline.
 */
export async function tabTo(page: Page, id: string, limit = 80): Promise<void> {
  for (let i = 0; i < limit; i++) {
    if ((await page.evaluate(() => document.activeElement?.id ?? '')) === id) {
      const outline = await page.evaluate(() => getComputedStyle(document.activeElement!).outlineStyle);
      expect(outline, `#${id} shows a visible focus outline`).not.toBe('none');
      return;
    }
    await page.keyboard.press('Tab');
  }
  throw new Error(
    `#${id} was not reached with ${limit} presses of Tab (focus is on #${await page.evaluate(() => document.activeElement?.id ?? '')})`,
  );
}

/** What `watch` saw: every console line, and the errors among them (console errors and page errors). */
export interface PageLog {
  text: () => string;
  errors: string[];
}

/** Relays page errors to the test output (they explain most failures) and keeps the console. */
export function watch(page: Page): PageLog {
  const lines: string[] = [];
  const errors: string[] = [];
  page.on('pageerror', (err) => {
    lines.push(`pageerror: ${err.message}`);
    errors.push(`pageerror: ${err.message}`);
    console.log(`[lab] page error: ${err.message}`);
  });
  page.on('console', (msg) => {
    lines.push(`${msg.type()}: ${msg.text()}`);
    if (msg.type() === 'error') errors.push(`console error: ${msg.text()} (${msg.location().url})`);
  });
  page.on('crash', () => {
    lines.push('the page crashed');
    errors.push('the page crashed');
    console.log('[lab] the page crashed');
  });
  return { text: () => lines.join('\n'), errors };
}

/** The lab logs no console error and throws no page error (a 404 probe or an exception fails the suite). */
export function expectNoConsoleErrors(log: PageLog): void {
  expect(log.errors, 'console errors and page errors').toEqual([]);
}

export async function attachConsole(testInfo: TestInfo, log: PageLog): Promise<void> {
  const text = log.text();
  if (text) await testInfo.attach('console', { body: text, contentType: 'text/plain' });
}

export function bytesOf(files: { name: string; buffer: Buffer }[], name: string): Buffer {
  const f = files.find((x) => x.name === name);
  if (!f) throw new Error(`no ${name}`);
  return f.buffer;
}

/** The safetensors header (8-byte little-endian length, then JSON) of a downloaded file. */
export function safetensorsHeader(bytes: Buffer): Record<string, unknown> {
  expect(bytes.length, 'model.safetensors is at least a header').toBeGreaterThan(8);
  const n = Number(bytes.readBigUInt64LE(0));
  expect(8 + n, 'the safetensors header length fits in the file').toBeLessThanOrEqual(bytes.length);
  return JSON.parse(bytes.subarray(8, 8 + n).toString('utf8')) as Record<string, unknown>;
}

/**
 * Runs the speculative panel on the first held-out prompt and checks the run: done, lossless, the
 * speculative text equal to the target-only text, acceptance length ≥ 1, both speeds > 0. Returns
 * #spec-stats' data attributes.
 */
export async function runSpeculative(page: Page): Promise<Record<string, string>> {
  const select = page.locator('#spec-prompt');
  const values = (await select.locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).filter(
    (v) => v !== '',
  );
  expect(values.length, '#spec-prompt offers prompts').toBeGreaterThan(0);
  await select.selectOption(values[0]);
  await expect(page.locator('#spec-run')).toBeEnabled();
  await page.locator('#spec-run').click();
  const stats = page.locator('#spec-stats');
  await expect(stats).toHaveAttribute('data-state', /^(done|error)$/, { timeout: TRAIN_TIMEOUT });
  const s = await stats.evaluate((el: HTMLElement) => ({ ...el.dataset }) as Record<string, string>);
  expect(s.state, `#spec-stats: ${(await stats.textContent())?.trim()}`).toBe('done');
  expect(s.lossless, 'speculative decoding reproduces the target').toBe('true');
  expect(s.targetText, 'data-target-text').toBeTruthy();
  expect(s.text, 'data-text (speculative) equals data-target-text (target alone)').toBe(s.targetText);
  expect(Number(s.acceptance), 'acceptance length (bonus token included) ≥ 1').toBeGreaterThanOrEqual(1);
  expect(Number(s.tpsDraft), 'data-tps-draft').toBeGreaterThan(0);
  expect(Number(s.tpsTarget), 'data-tps-target').toBeGreaterThan(0);
  return s;
}
