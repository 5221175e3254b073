/**
 * End-to-end tests of the browser lab page (web/), driven through its UI contract: `#status` and its
 * data attributes, the settings inputs and run buttons, the charts, the TTT visibility grid, the
 * speculative panel, the model panel and export / import. See playwright.config.ts for how the built
 * site is served and how Chromium gets WebGPU.
 *
 * One training run is shared by the train / export / speculative tests (describe.serial, one page);
 * the reload test and the model-file tests each get a fresh browser context, hence a fresh IndexedDB.
 * Every test saves full-page screenshots under test-results/e2e/<test>/ (git-ignored); the trained lab
 * with the speculative panel filled in also goes to docs/lab.png, the README's picture, when
 * SPECLAB_E2E_DOCS=1 (CI leaves docs/ alone).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, expect, test, type Browser, type Download, type Page, type TestInfo } from '@playwright/test';
import { CHROMIUM_PATH } from '../runners/chromium-flags.ts';
import { sealJson } from '../../src/util/sealed-json.ts';
import { DEFAULT_SETTINGS } from '../../web/lab/protocol.ts';

const LAB_TARGET = fileURLToPath(new URL('../../assets/lab-target/', import.meta.url));
const DOCS_SCREENSHOT = fileURLToPath(new URL('../../docs/lab.png', import.meta.url));

const MINUTE = 60_000;
/** Target generation (rollouts) plus training steps on the software adapter of a 2-core machine. */
const TRAIN_TIMEOUT = 5 * MINUTE;

type Phase = 'idle' | 'loading' | 'data' | 'training' | 'paused' | 'stopped' | 'done' | 'error';

/** Small settings: 8 prompts × 4 epochs / batch 4 = 8 optimizer steps. */
const SMALL = {
  'train-prompts': 8,
  'response-length': 16,
  epochs: 4,
  'batch-size': 4,
  'ttt-length': 3,
  'rollout-workers': 2,
} as const;
type Settings = Record<keyof typeof SMALL, number>;

const CHARTS = ['chart-loss', 'chart-acc', 'chart-acceptance', 'chart-throughput', 'chart-queue', 'chart-lifecycle'] as const;

interface Status {
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

async function readStatus(page: Page): Promise<Status> {
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
async function pageDiagnosis(page: Page): Promise<string> {
  const text = async (selector: string): Promise<string> => {
    const el = page.locator(selector);
    if ((await el.count().catch(() => 0)) === 0) return '';
    return ((await el.first().textContent().catch(() => '')) ?? '').trim();
  };
  const gpuShown = await page.locator('#gpu-error').isVisible().catch(() => false);
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
async function waitForPhase(page: Page, wanted: readonly Phase[], timeout: number): Promise<Status> {
  await page.waitForFunction(
    (phases) => {
      const phase = document.querySelector<HTMLElement>('#status')?.dataset.phase;
      return phase !== undefined && (phases.includes(phase) || phase === 'error');
    },
    [...wanted] as string[],
    { timeout, polling: 250 },
  );
  const status = await readStatus(page);
  expect(wanted as readonly string[], `#status data-phase is "${status.phase}", wanted ${wanted.join(' | ')}; ${await pageDiagnosis(page)}`).toContain(status.phase);
  return status;
}

/** Opens the lab and waits until it has settled. */
async function openLab(page: Page): Promise<Status> {
  await page.goto('/');
  return settle(page);
}

/**
 * Waits until the loaded lab has settled: a phase other than `loading`, the lab target loaded
 * (`#model-status` ready) and `#start` enabled (start, or continue a saved run).
 */
async function settle(page: Page): Promise<Status> {
  await expect(page.locator('#status')).toBeAttached();
  try {
    await expect(page.locator('#gpu-error'), 'WebGPU should be available (SwiftShader)').toBeHidden();
    await expect(page.locator('#model-status'), 'the lab target loads').toHaveAttribute('data-state', /^(ready|error)$/, { timeout: 3 * MINUTE });
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
async function discardSavedRun(page: Page): Promise<void> {
  if ((await readStatus(page)).resumable) {
    await page.locator('#discard').click();
    await expect(page.locator('#status')).not.toHaveAttribute('data-resumable', 'true');
  }
}

async function applySettings(page: Page, settings: Settings): Promise<void> {
  for (const [id, value] of Object.entries(settings)) {
    const input = page.locator(`#${id}`);
    await expect(input, `settings input #${id}`).toBeEditable();
    await input.fill(String(value));
    await expect(input).toHaveValue(String(value));
  }
}

/** Saves a full-page screenshot into the test's output folder (test-results/e2e/…/NAME.png), and to `also`. */
async function snap(page: Page, testInfo: TestInfo, name: string, also?: string): Promise<void> {
  const path = testInfo.outputPath(`${name}.png`);
  await page.screenshot({ path, fullPage: true });
  if (also && process.env.SPECLAB_E2E_DOCS === '1') {
    await mkdir(dirname(also), { recursive: true });
    await writeFile(also, await readFile(path));
  }
}

/** Relays page errors to the test output (they explain most failures) and keeps the console. */
function watch(page: Page): () => string {
  const lines: string[] = [];
  page.on('pageerror', (err) => {
    lines.push(`pageerror: ${err.message}`);
    console.log(`[lab] page error: ${err.message}`);
  });
  page.on('console', (msg) => lines.push(`${msg.type()}: ${msg.text()}`));
  page.on('crash', () => {
    lines.push('the page crashed');
    console.log('[lab] the page crashed');
  });
  return () => lines.join('\n');
}

async function attachConsole(testInfo: TestInfo, log: () => string): Promise<void> {
  const text = log();
  if (text) await testInfo.attach('console', { body: text, contentType: 'text/plain' });
}

function bytesOf(files: { name: string; buffer: Buffer }[], name: string): Buffer {
  const f = files.find((x) => x.name === name);
  if (!f) throw new Error(`no ${name}`);
  return f.buffer;
}

/** The safetensors header (8-byte little-endian length, then JSON) of a downloaded file. */
function safetensorsHeader(bytes: Buffer): Record<string, unknown> {
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
async function runSpeculative(page: Page): Promise<Record<string, string>> {
  const select = page.locator('#spec-prompt');
  const values = (await select.locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).filter((v) => v !== '');
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

test.describe('browser', () => {
  test('Chromium has a WebGPU adapter', async ({ page }) => {
    await page.goto('/');
    const info = await page.evaluate(async () => {
      const gpu = (navigator as Navigator & { gpu?: GPU }).gpu;
      if (!gpu) return { ok: false, why: 'navigator.gpu is undefined' };
      const adapter = await gpu.requestAdapter();
      if (!adapter) return { ok: false, why: 'requestAdapter() returned null' };
      const device = await adapter.requestDevice();
      const facts = { ok: true, why: '', vendor: adapter.info.vendor, architecture: adapter.info.architecture, description: adapter.info.description };
      device.destroy();
      return facts;
    });
    expect(info.ok, info.why).toBe(true);
  });
});

test.describe('no WebGPU', () => {
  test('the page says so clearly when the browser has no WebGPU adapter', async ({ baseURL }, testInfo) => {
    // Chromium without the unsafe-WebGPU flags and with the GPU disabled: no adapter on this machine.
    const plain = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
    try {
      const page = await plain.newPage();
      await page.goto(baseURL!);
      await expect(page.locator('#gpu-error')).toBeVisible({ timeout: 30_000 });
      await expect(page.locator('#gpu-error')).toContainText('WebGPU');
      await expect(page.locator('#start')).toBeDisabled();
      await page.screenshot({ path: testInfo.outputPath('no-webgpu.png'), fullPage: true });
    } finally {
      await plain.close();
    }
  });
});

test.describe.serial('one training run', () => {
  let page: Page;
  let log: () => string;
  let trained = false;
  let trainedSpec: Record<string, string> | undefined;
  const exported: { name: string; buffer: Buffer }[] = [];

  test.beforeAll(async ({ browser }: { browser: Browser }) => {
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    log = watch(page);
  });

  test.afterEach(async () => {
    const testInfo = test.info();
    if (testInfo.status !== testInfo.expectedStatus) await snap(page, testInfo, 'failure').catch(() => undefined);
    await attachConsole(testInfo, log);
  });

  test.afterAll(async () => {
    await page.context().close();
  });

  test('train a few steps and see the loss fall', async () => {
    const testInfo = test.info();
    const initial = await openLab(page);
    expect(initial.phase, 'a fresh context starts idle').toBe('idle');
    await expect(page.locator('#adapter'), '#adapter shows the adapter facts').not.toBeEmpty();
    await discardSavedRun(page);
    await applySettings(page, SMALL);
    // The GPU memory plan is on the page before Start, and follows the settings.
    const plan = page.locator('#memory-plan');
    await expect(plan, '#memory-plan shows before Start').toBeVisible();
    await expect(plan, '#memory-plan fits the adapter').toHaveAttribute('data-state', 'fits');
    await expect(plan).toContainText(/GPU memory plan: \S+ \S+ in all, largest .*fits this adapter/);
    await expect(plan.locator('table.memory-plan tr', { hasText: 'draft weights' })).toBeVisible();
    const planned = Number(await plan.getAttribute('data-total'));
    await page.locator('#batch-size').fill(String(2 * SMALL['batch-size']));
    await expect.poll(async () => Number(await plan.getAttribute('data-total')), 'a larger batch needs more memory').toBeGreaterThan(planned);
    await page.locator('#batch-size').fill(String(SMALL['batch-size']));
    await expect(plan).toHaveAttribute('data-total', String(planned));
    await snap(page, testInfo, 'settings');

    await page.locator('#start').click();
    const done = await waitForPhase(page, ['done'], TRAIN_TIMEOUT);
    const steps = (SMALL.epochs * SMALL['train-prompts']) / SMALL['batch-size'];
    expect(done.total, 'data-total = epochs × prompts / batch').toBe(steps);
    expect(done.step, 'every step ran').toBe(done.total);
    expect(Number.isFinite(done.firstLoss) && done.firstLoss > 0, `data-first-loss is a positive number (got ${done.firstLoss})`).toBe(true);
    expect(Number.isFinite(done.loss), `data-loss is a number (got ${done.loss})`).toBe(true);
    expect(done.loss, `the loss falls: step 1 ${done.firstLoss} → step ${done.step} ${done.loss}`).toBeLessThan(done.firstLoss);
    expect(done.acked, 'every sample acked once').toBe(SMALL.epochs * SMALL['train-prompts']);
    expect(done.committed, 'every sample committed once').toBe(SMALL.epochs * SMALL['train-prompts']);

    for (const id of CHARTS) {
      await expect(page.locator(`#${id} canvas`).first(), `#${id} has a uPlot canvas`).toBeVisible();
    }
    const tables = page.locator('.chart-numbers');
    expect(await tables.count(), 'a .chart-numbers table per chart').toBeGreaterThanOrEqual(CHARTS.length);
    for (const table of await tables.all()) await expect(table, '.chart-numbers shows numbers').toContainText(/\d/);
    await expect(page.locator('#ttt-visibility .visible').first(), '#ttt-visibility shows visible cells').toBeVisible();

    // Evaluation while training: the held-out prompts are scored every few steps and at the last.
    const evalStatus = page.locator('#eval-status');
    await expect(evalStatus, '#eval-status reports a held-out evaluation').toHaveAttribute('data-state', 'done');
    const ev = await evalStatus.evaluate((el: HTMLElement) => ({ ...el.dataset }) as Record<string, string>);
    const evStep = Number(ev.step);
    const accLen = Number(ev.accLen);
    const acc0 = Number(ev.acc0);
    expect(evStep, 'the last step is always evaluated (#eval-status data-step)').toBe(done.total);
    expect(Number.isFinite(accLen) && accLen >= 0 && accLen <= SMALL['ttt-length'], `held-out data-acc-len is in [0, ttt length] (got ${ev.accLen})`).toBe(true);
    expect(Number.isFinite(acc0) && acc0 >= 0 && acc0 <= 1, `held-out data-acc0 is in [0, 1] (got ${ev.acc0})`).toBe(true);
    expect(Number(ev.tokens), 'held-out tokens were scored').toBeGreaterThan(0);
    await expect(evalStatus, '#eval-status says it in words').toContainText('simulated acceptance length');
    await expect(page.locator('#chart-eval canvas').first(), '#chart-eval has a uPlot canvas').toBeVisible();
    await expect(page.locator('.chart-numbers[data-for="chart-acceptance"]'), 'the acceptance table has a held-out row').toContainText('held-out');
    console.log(`[lab] held-out after step ${evStep}: simulated acceptance length ${accLen}, acc_0 ${acc0}, loss ${ev.loss}`);

    trained = true;
    console.log(`[lab] trained ${done.step} steps: loss ${done.firstLoss} → ${done.loss}; ${done.committed} samples committed, ${done.acked} acked`);
    await snap(page, testInfo, 'trained', DOCS_SCREENSHOT);
  });

  test('speculative decoding with the trained draft is lossless', async () => {
    const testInfo = test.info();
    expect(trained, 'needs the trained lab of the first test').toBe(true);
    const s = await runSpeculative(page);
    expect(await page.locator('#spec-output span').count(), '#spec-output shows the tokens').toBeGreaterThan(0);
    trainedSpec = s;
    console.log(`[lab] trained draft: acceptance length ${s.acceptance}, ${s.tpsDraft} tokens/s with the draft, ${s.tpsTarget} target alone`);
    await snap(page, testInfo, 'speculative', DOCS_SCREENSHOT);
  });

  test('export the draft, import it again, decode with the import', async () => {
    const testInfo = test.info();
    expect(trained, 'needs the trained lab of the previous test').toBe(true);
    const downloads: Download[] = [];
    const onDownload = (d: Download): void => void downloads.push(d);
    page.on('download', onDownload);
    try {
      await page.locator('#export').click();
      await expect.poll(() => downloads.length, { message: '#export downloads two files', timeout: 2 * MINUTE }).toBe(2);
    } finally {
      page.off('download', onDownload);
    }
    const paths: string[] = [];
    for (const d of downloads) {
      const path = testInfo.outputPath('export', d.suggestedFilename());
      await d.saveAs(path);
      expect(await d.failure(), `download ${d.suggestedFilename()}`).toBeNull();
      paths.push(path);
      exported.push({ name: d.suggestedFilename(), buffer: await readFile(path) });
    }
    expect(exported.map((f) => f.name).sort()).toEqual(['config.json', 'model.safetensors']);

    const config = JSON.parse(bytesOf(exported, 'config.json').toString('utf8')) as { architectures?: string[] };
    expect(config.architectures, 'an SGLang EAGLE3 draft config').toEqual(['LlamaForCausalLMEagle3']);
    const header = safetensorsHeader(bytesOf(exported, 'model.safetensors'));
    expect(Object.keys(header).filter((k) => k !== '__metadata__').length, 'the export has tensors').toBeGreaterThan(0);

    await page.locator('#import-files').setInputFiles(paths);
    const importStatus = page.locator('#import-status');
    await expect(importStatus).toHaveAttribute('data-state', /^(ready|error)$/, { timeout: MINUTE });
    const state = await importStatus.getAttribute('data-state');
    expect(state, `#import-status: ${(await importStatus.textContent())?.trim()}`).toBe('ready');
    await snap(page, testInfo, 'imported');

    // The imported draft is the trained one: same tokens, same acceptance on the same prompt.
    const s = await runSpeculative(page);
    if (trainedSpec) {
      expect(s.text, 'the imported draft decodes the same text').toBe(trainedSpec.text);
      expect(Number(s.acceptance), 'the imported draft has the trained draft\'s acceptance length').toBeCloseTo(Number(trainedSpec.acceptance), 6);
    }
    await snap(page, testInfo, 'imported-speculative');
  });
});

test.describe('persistence', () => {
  test('reload mid-run, then continue the saved run to the end', async ({ page }, testInfo) => {
    const log = watch(page);
    try {
      const settings: Settings = { ...SMALL, epochs: 6 };
      const total = (settings.epochs * settings['train-prompts']) / settings['batch-size'];
      await openLab(page);
      await discardSavedRun(page);
      await applySettings(page, settings);
      await page.locator('#start').click();

      // Mid-run: at least 3 steps done, not finished.
      await page.waitForFunction(
        () => {
          const d = document.querySelector<HTMLElement>('#status')?.dataset;
          return d !== undefined && (Number(d.step) >= 3 || d.phase === 'done' || d.phase === 'error');
        },
        undefined,
        { timeout: TRAIN_TIMEOUT, polling: 100 },
      );
      const mid = await readStatus(page);
      expect(['data', 'training'], `mid-run (rollouts or training); ${await pageDiagnosis(page)}`).toContain(mid.phase);
      expect(mid.step, 'reloading before the last step').toBeLessThan(total);
      await snap(page, testInfo, 'before-reload');

      // The last step the page showed, recorded as the document goes away (no step can finish after).
      await page.evaluate(() => {
        addEventListener('pagehide', () => {
          sessionStorage.setItem('speclab-e2e-step-at-unload', document.querySelector<HTMLElement>('#status')?.dataset.step ?? '');
        });
      });
      await page.reload();
      const stepAtUnload = Number(await page.evaluate(() => sessionStorage.getItem('speclab-e2e-step-at-unload')));
      expect(stepAtUnload, 'data-step when the page was unloaded').toBeGreaterThanOrEqual(mid.step);

      await settle(page);
      await expect(page.locator('#status'), 'a saved run can be continued').toHaveAttribute('data-resumable', 'true', { timeout: MINUTE });
      const reloaded = await readStatus(page);
      expect(['training', 'error'], `after a reload the run waits for #start (phase "${reloaded.phase}")`).not.toContain(reloaded.phase);
      expect(reloaded.step, 'the last checkpointed step is > 0').toBeGreaterThan(0);
      expect(reloaded.step, `the last checkpointed step is ≤ the step shown at unload (${stepAtUnload})`).toBeLessThanOrEqual(stepAtUnload);
      expect.soft(reloaded.acked, 'after a reload, data-acked shows the durable ack: exactly the checkpointed steps × batch').toBe(reloaded.step * settings['batch-size']);
      console.log(`[lab] reloaded at step ${stepAtUnload} of ${total}; saved run at step ${reloaded.step}, ${reloaded.acked} samples acked`);
      await snap(page, testInfo, 'after-reload');

      await page.locator('#start').click();
      const done = await waitForPhase(page, ['done'], TRAIN_TIMEOUT);
      expect(done.total, 'data-total = epochs × prompts / batch').toBe(total);
      expect(done.step, 'data-step = data-total').toBe(done.total);
      const samples = settings.epochs * settings['train-prompts'];
      expect(done.acked, 'every sample acked exactly once').toBe(samples);
      expect(done.committed, 'every sample committed exactly once').toBe(samples);
      expect(done.resumable, 'a finished run is not resumable').toBe(false);
      await snap(page, testInfo, 'continued');
    } finally {
      await attachConsole(testInfo, log);
    }
  });

  test('a damaged saved run is refused naming run.json; only Discard is offered, and it clears the run', async ({ page }, testInfo) => {
    const log = watch(page);
    try {
      await openLab(page);
      await discardSavedRun(page);
      // A sealed run.json as the worker writes it, with one digit of the body changed afterwards.
      const sealed = sealJson({ settings: { ...DEFAULT_SETTINGS }, model: 'lab-target', total: 48 });
      const at = sealed.lastIndexOf('4'.charCodeAt(0));
      sealed[at] = '5'.charCodeAt(0);
      await page.evaluate(async (bytes) => {
        const db = await new Promise<IDBDatabase>((resolve, reject) => {
          const open = indexedDB.open('speclab-files:speclab-lab', 1);
          open.onupgradeneeded = () => open.result.createObjectStore('files');
          open.onsuccess = () => resolve(open.result);
          open.onerror = () => reject(open.error ?? new Error('indexedDB.open failed'));
        });
        await new Promise<void>((resolve, reject) => {
          const tx = db.transaction('files', 'readwrite');
          tx.objectStore('files').put(new Uint8Array(bytes), 'run.json');
          tx.oncomplete = () => resolve();
          tx.onerror = () => reject(tx.error ?? new Error('IndexedDB write failed'));
        });
        db.close();
      }, [...sealed]);
      await page.reload();
      await expect(page.locator('#status'), 'the damaged run is reported').toHaveAttribute('data-damaged', 'true', { timeout: 3 * MINUTE });
      await expect(page.locator('#run-detail'), 'the message names the file and the check').toContainText(/speclab-lab\/run\.json: the saved run .* is damaged \(CRC-32/);
      await expect(page.locator('#start'), 'nothing can continue a damaged run').toBeDisabled();
      await expect(page.locator('#discard'), 'Discard is offered').toBeEnabled();
      await snap(page, testInfo, 'damaged-run');
      await page.locator('#discard').click();
      await expect(page.locator('#status'), 'discarded').not.toHaveAttribute('data-damaged', 'true');
      await expect(page.locator('#start'), 'a new run can start').toBeEnabled({ timeout: MINUTE });
    } finally {
      await attachConsole(testInfo, log);
    }
  });
});

test.describe('model files', () => {
  /** The lab target's files, read from assets/lab-target, as setInputFiles payloads. */
  async function labTargetFiles(): Promise<{ name: string; mimeType: string; buffer: Buffer }[]> {
    const names = ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'];
    return Promise.all(
      names.map(async (name) => ({
        name,
        mimeType: name.endsWith('.json') ? 'application/json' : 'application/octet-stream',
        buffer: await readFile(LAB_TARGET + name),
      })),
    );
  }

  function replace(files: { name: string; mimeType: string; buffer: Buffer }[], name: string, buffer: Buffer) {
    return files.map((f) => (f.name === name ? { ...f, buffer } : f));
  }

  /** Waits until `#model-status` is `error` and names every one of `mentions` (and none of `not`). */
  async function expectModelError(page: Page, mentions: string[], not: string[] = []): Promise<void> {
    const status = page.locator('#model-status');
    await expect(async () => {
      const state = await status.getAttribute('data-state');
      const text = (await status.textContent()) ?? '';
      expect(state, `#model-status data-state (text: ${text.trim()})`).toBe('error');
      for (const m of mentions) expect(text, `#model-status names ${m}`).toContain(m);
      for (const m of not) expect(text, `#model-status is about this pick, not an earlier one`).not.toContain(m);
    }).toPass({ timeout: MINUTE });
  }

  /**
   * Picks model files: `#model-files` is a folder picker (webkitdirectory), so the files are written
   * to a folder in the test's output and the folder is picked; a plain multiple-file input gets the files.
   */
  async function pickModel(page: Page, testInfo: TestInfo, folder: string, files: { name: string; buffer: Buffer }[]): Promise<void> {
    const input = page.locator('#model-files');
    const dir = testInfo.outputPath(folder);
    await mkdir(dir, { recursive: true });
    const paths: string[] = [];
    for (const f of files) {
      paths.push(join(dir, f.name));
      await writeFile(join(dir, f.name), f.buffer);
    }
    const folderPicker = await input.evaluate((el) => (el as HTMLInputElement).webkitdirectory);
    await input.setInputFiles(folderPicker ? dir : paths);
  }

  test('malformed checkpoints are refused naming the file; intact files load after', async ({ page }, testInfo) => {
    const log = watch(page);
    try {
      await openLab(page);
      const files = await labTargetFiles();

      const config = JSON.parse(bytesOf(files, 'config.json').toString('utf8')) as Record<string, unknown>;
      config.architectures = ['NopeForCausalLM'];
      await pickModel(page, testInfo, 'bad-architecture', replace(files, 'config.json', Buffer.from(JSON.stringify(config, null, 2))));
      await expectModelError(page, ['config.json', 'NopeForCausalLM']);
      await snap(page, testInfo, 'bad-architecture');

      const weights = bytesOf(files, 'model.safetensors');
      await pickModel(page, testInfo, 'truncated-weights', replace(files, 'model.safetensors', weights.subarray(0, Math.floor(weights.length / 2))));
      await expectModelError(page, ['model.safetensors'], ['NopeForCausalLM']);
      await snap(page, testInfo, 'truncated-weights');

      // The panel recovers: the intact files load.
      await pickModel(page, testInfo, 'lab-target', files);
      const status = page.locator('#model-status');
      await expect(status).toHaveAttribute('data-state', /^(ready|loading)$/, { timeout: MINUTE });
      await expect(status).toHaveAttribute('data-state', /^(ready|error)$/, { timeout: 2 * MINUTE });
      expect(await status.getAttribute('data-state'), `#model-status after picking the intact lab target: ${(await status.textContent())?.trim()}`).toBe('ready');
      await snap(page, testInfo, 'model-ready');
    } finally {
      await attachConsole(testInfo, log);
    }
  });
});
