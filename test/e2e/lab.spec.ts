/**
 * End-to-end tests of the browser lab page (web/), driven through its UI contract: `#status` and its
 * data attributes, the settings inputs and run buttons, the progress panel, the charts, the
 * speculative panel, the model panel and export / import. See playwright.config.ts for how the built
 * site is served and how Chromium gets WebGPU; shared helpers are in ./lab-helpers.ts, and the tests
 * that need no training run (validation, metrics.jsonl, narrow screens) in ./lab-ui.spec.ts.
 *
 * One training run is shared by the train / export / speculative tests (describe.serial, one page);
 * the reload test and the model-file tests each get a fresh browser context, hence a fresh IndexedDB.
 * Every lab test fails on a console error or page error. Screenshots go under test-results/e2e/<test>/
 * (git-ignored); the trained lab with the speculative panel filled in also goes to docs/lab-1280.png
 * and docs/lab-390.png, the README's pictures, when SPECLAB_E2E_DOCS=1 (CI leaves docs/ alone).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BlobReader, Uint8ArrayWriter, ZipReader } from '@zip.js/zip.js';
import { chromium, expect, test, type Browser, type Page, type TestInfo } from '@playwright/test';
import { CHROMIUM_PATH } from '../runners/chromium-flags.ts';
import { sealJson } from '../../src/util/sealed-json.ts';
import { DEFAULT_SETTINGS } from '../../web/lab/protocol.ts';
import {
  applySettings,
  attachConsole,
  bytesOf,
  CHARTS,
  discardSavedRun,
  expectAccessible,
  expectNoConsoleErrors,
  expectNoHorizontalScroll,
  MINUTE,
  openLab,
  pageDiagnosis,
  readStatus,
  runSpeculative,
  safetensorsHeader,
  settle,
  SMALL,
  snap,
  snapWidths,
  tabTo,
  TRAIN_TIMEOUT,
  waitForPhase,
  watch,
  type PageLog,
  type Settings,
} from './lab-helpers.ts';

const LAB_TARGET = fileURLToPath(new URL('../../assets/lab-target/', import.meta.url));

test.describe('browser', () => {
  test('Chromium has a WebGPU adapter', async ({ page }) => {
    const log = watch(page);
    await page.goto('/');
    const info = await page.evaluate(async () => {
      const gpu = (navigator as Navigator & { gpu?: GPU }).gpu;
      if (!gpu) return { ok: false, why: 'navigator.gpu is undefined' };
      const adapter = await gpu.requestAdapter();
      if (!adapter) return { ok: false, why: 'requestAdapter() returned null' };
      const device = await adapter.requestDevice();
      const facts = {
        ok: true,
        why: '',
        vendor: adapter.info.vendor,
        architecture: adapter.info.architecture,
        description: adapter.info.description,
      };
      device.destroy();
      return facts;
    });
    expect(info.ok, info.why).toBe(true);
    expectNoConsoleErrors(log);
  });
});

test.describe('no WebGPU', () => {
  test('the page says so clearly when the browser has no WebGPU adapter', async ({ baseURL }, testInfo) => {
    // Chromium without the unsafe-WebGPU flags and with the GPU disabled: no adapter on this machine.
    const plain = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
    try {
      const page = await plain.newPage();
      const log = watch(page);
      await page.goto(baseURL!);
      await expect(page.locator('#gpu-error')).toBeVisible({ timeout: 30_000 });
      await expect(page.locator('#gpu-error')).toContainText('WebGPU');
      await expect(page.locator('#bar-adapter'), 'the status bar says it too').toHaveText('no WebGPU');
      await expect(page.locator('#start')).toBeDisabled();
      await page.screenshot({ path: testInfo.outputPath('no-webgpu.png'), fullPage: true });
      // Said on the page, not thrown: no console error, no page error.
      await attachConsole(testInfo, log);
      expectNoConsoleErrors(log);
    } finally {
      await plain.close();
    }
  });
});

test.describe.serial('one training run', () => {
  let page: Page;
  let log: PageLog;
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
    expectNoConsoleErrors(log);
  });

  test.afterAll(async () => {
    await page.context().close();
  });

  test('train a few steps and see the loss fall', async () => {
    const testInfo = test.info();
    const initial = await openLab(page);
    expect(initial.phase, 'a fresh context starts idle').toBe('idle');
    await expect(page.locator('#adapter'), '#adapter shows the adapter facts').not.toBeEmpty();
    // The introduction and the status bar: what EAGLE3 is, what runs where, the model, adapter and run state.
    await expect(page.locator('.intro'), 'the page says what EAGLE3 is').toContainText('EAGLE3');
    await expect(page.locator('.intro'), 'the page says what runs where').toContainText("this tab's GPU");
    await expect(page.locator('#bar-model'), 'the status bar names the model').toContainText('lab-target');
    await expect(page.locator('#bar-adapter'), 'the status bar names the adapter').not.toHaveText(/acquiring/);
    await expect(page.locator('#bar-run'), 'the status bar shows the run state').toHaveAttribute('data-phase', 'idle');
    await expectAccessible(page, 'at load');
    await discardSavedRun(page);
    await applySettings(page, SMALL);

    // Inputs are checked against their own min / max: a message beside the input, Start disabled.
    await page.locator('#ttt-length').fill('12');
    await expect(page.locator('#ttt-length-error'), 'an inline message names the limit').toHaveText(/TTT length: at most 8 \(got 12\)/);
    await expect(page.locator('#ttt-length')).toHaveAttribute('aria-invalid', 'true');
    await expect(page.locator('#start'), 'Start is disabled while a setting is invalid').toBeDisabled();
    await page.locator('#ttt-length').fill(String(SMALL['ttt-length']));
    await expect(page.locator('#ttt-length-error')).toHaveCount(0);
    await expect(page.locator('#start'), 'Start is enabled again').toBeEnabled();
    // The GPU memory plan is on the page before Start, and follows the settings.
    const plan = page.locator('#memory-plan');
    await expect(plan, '#memory-plan shows before Start').toBeVisible();
    const planBox = await plan.boundingBox();
    expect(planBox && planBox.y + planBox.height <= 900, '#memory-plan is in the first screen at 1280 × 900, beside the settings').toBe(
      true,
    );
    await expect(plan, '#memory-plan fits the adapter').toHaveAttribute('data-state', 'fits');
    await expect(plan).toContainText(/GPU memory plan: \S+ \S+ in all, largest .*fits this adapter/);
    await expect(plan.locator('table.memory-plan tr', { hasText: 'draft weights' })).toBeVisible();
    const planned = Number(await plan.getAttribute('data-total'));
    await page.locator('#batch-size').fill(String(2 * SMALL['batch-size']));
    await expect
      .poll(async () => Number(await plan.getAttribute('data-total')), 'a larger batch needs more memory')
      .toBeGreaterThan(planned);
    await page.locator('#batch-size').fill(String(SMALL['batch-size']));
    await expect(plan).toHaveAttribute('data-total', String(planned));
    await snap(page, testInfo, 'settings');

    // Every progress state the page shows, recorded as it changes (the data phase can be short).
    await page.evaluate(() => {
      const el = document.querySelector<HTMLElement>('#progress')!;
      const seen: string[] = [];
      (window as unknown as { progressSeen: string[] }).progressSeen = seen;
      new MutationObserver(() =>
        seen.push(
          `${el.dataset.task} ${el.dataset.done}/${el.dataset.total} eta=${el.dataset.etaS} | ${el.querySelector('#progress-label')?.textContent}`,
        ),
      ).observe(el, { attributes: true, subtree: true, childList: true, characterData: true });
    });
    // Keyboard only: Tab to Start and press Enter; Tab to Pause, Space; Tab to Resume, Enter.
    await tabTo(page, 'start');
    await page.keyboard.press('Enter');
    await waitForPhase(page, ['training'], TRAIN_TIMEOUT);
    await tabTo(page, 'pause');
    await page.keyboard.press('Space');
    const paused = await waitForPhase(page, ['paused'], TRAIN_TIMEOUT);
    await expect(page.locator('#progress-label'), 'the progress panel says paused').toContainText(`Paused after step ${paused.step}`);
    await tabTo(page, 'resume');
    await page.keyboard.press('Enter');
    const done = await waitForPhase(page, ['done'], TRAIN_TIMEOUT);
    const steps = (SMALL.epochs * SMALL['train-prompts']) / SMALL['batch-size'];
    expect(done.total, 'data-total = epochs × prompts / batch').toBe(steps);
    expect(done.step, 'every step ran').toBe(done.total);
    expect(Number.isFinite(done.firstLoss) && done.firstLoss > 0, `data-first-loss is a positive number (got ${done.firstLoss})`).toBe(
      true,
    );
    expect(Number.isFinite(done.loss), `data-loss is a number (got ${done.loss})`).toBe(true);
    expect(done.loss, `the loss falls: step 1 ${done.firstLoss} → step ${done.step} ${done.loss}`).toBeLessThan(done.firstLoss);
    expect(done.acked, 'every sample acked once').toBe(SMALL.epochs * SMALL['train-prompts']);
    expect(done.committed, 'every sample committed once').toBe(SMALL.epochs * SMALL['train-prompts']);

    // Progress: the data phase counted the prompts, the first (compiling) step is timed apart from the steady state.
    const seen = await page.evaluate(() => (window as unknown as { progressSeen: string[] }).progressSeen);
    const promptsTotal = seen.find((line) => line.startsWith(`prompts ${SMALL['train-prompts']}/${SMALL['train-prompts']}`));
    expect(
      promptsTotal,
      `the data phase reported all ${SMALL['train-prompts']} training prompts done; seen:\n${seen.slice(0, 20).join('\n')}`,
    ).toBeTruthy();
    expect(
      seen.some((line) => /^prompts \d+\/\d+ .*Data 2 of 2 .* of \d+ prompts/.test(line)),
      'the data phase says what it does, with counts',
    ).toBe(true);
    expect(
      seen.some((line) => /^training \d+\/\d+ eta=\d/.test(line)),
      'training shows an ETA',
    ).toBe(true);
    const prog = await page.locator('#progress').evaluate((el: HTMLElement) => ({ ...el.dataset }) as Record<string, string>);
    expect(Number(prog.firstStepMs), 'the first step (shader compile) is timed').toBeGreaterThan(0);
    expect(Number(prog.steadyStepMs), 'the steady-state step time is measured').toBeGreaterThan(0);
    expect(Number(prog.evalsDone), 'held-out evaluations counted').toBeGreaterThan(0);
    expect(prog.evalsDone, 'every held-out evaluation ran').toBe(prog.evalsTotal);
    await expect(page.locator('#progress-timing')).toContainText(
      /First step .* \(includes compiling the GPU shaders, once per tab\); steady state .* per step/,
    );
    console.log(`[lab] first step ${prog.firstStepMs} ms, then ${prog.steadyStepMs} ms per step`);

    for (const id of CHARTS) {
      await expect(page.locator(`#${id} canvas`).first(), `#${id} has a uPlot canvas`).toBeVisible();
    }
    const tables = page.locator('.chart-numbers');
    expect(await tables.count(), 'a .chart-numbers table per chart').toBeGreaterThanOrEqual(CHARTS.length);
    for (const table of await tables.all()) await expect(table, '.chart-numbers shows numbers').toContainText(/\d/);
    // The tables are the legends (a swatch per series); uPlot's own legend of "--" is gone.
    await expect(page.locator('.u-legend'), 'no uPlot legend').toHaveCount(0);
    for (const id of CHARTS) await expect(page.locator(`#${id} .uplot`), `#${id} holds one plot`).toHaveCount(1);
    await expect(page.locator('.chart-numbers[data-for="chart-loss"] .swatch')).toHaveCount(SMALL['ttt-length']);
    // Counts and bytes on separate charts.
    await expect(page.locator('.chart-numbers[data-for="chart-queue"]')).not.toContainText('MB');
    await expect(page.locator('.chart-numbers[data-for="chart-store"]')).toContainText('MB');
    // Acceptance length includes the bonus token: the simulated one is at least 1.
    const accCell = await page
      .locator('.chart-numbers[data-for="chart-acceptance"] tr', { hasText: 'training batch (simulated)' })
      .locator('td')
      .textContent();
    expect(Number(accCell), `simulated acceptance length (bonus included) ≥ 1 (got ${accCell})`).toBeGreaterThanOrEqual(1);
    await expect(page.locator('.chart-numbers[data-for="chart-accept-rate"]'), 'per-position acceptance over training').toContainText(
      /held-out rate k=0\s*0\.\d{3}/,
    );
    await expect(page.locator('#ttt-visibility .visible').first(), '#ttt-visibility shows visible cells').toBeVisible();

    // Evaluation while training: the held-out prompts are scored every few steps and at the last.
    const evalStatus = page.locator('#eval-status');
    await expect(evalStatus, '#eval-status reports a held-out evaluation').toHaveAttribute('data-state', 'done');
    const ev = await evalStatus.evaluate((el: HTMLElement) => ({ ...el.dataset }) as Record<string, string>);
    const evStep = Number(ev.step);
    const accLen = Number(ev.accLen);
    const acc0 = Number(ev.acc0);
    expect(evStep, 'the last step is always evaluated (#eval-status data-step)').toBe(done.total);
    expect(
      Number.isFinite(accLen) && accLen >= 1 && accLen <= SMALL['ttt-length'] + 1,
      `held-out data-acc-len (bonus included) is in [1, ttt length + 1] (got ${ev.accLen})`,
    ).toBe(true);
    expect(Number.isFinite(acc0) && acc0 >= 0 && acc0 <= 1, `held-out data-acc0 is in [0, 1] (got ${ev.acc0})`).toBe(true);
    expect(Number(ev.tokens), 'held-out tokens were scored').toBeGreaterThan(0);
    await expect(evalStatus, '#eval-status says it in words').toContainText('simulated acceptance length');
    await expect(page.locator('#chart-eval canvas').first(), '#chart-eval has a uPlot canvas').toBeVisible();
    await expect(page.locator('.chart-numbers[data-for="chart-acceptance"]'), 'the acceptance table has a held-out row').toContainText(
      'held-out',
    );
    console.log(`[lab] held-out after step ${evStep}: simulated acceptance length ${accLen}, acc_0 ${acc0}, loss ${ev.loss}`);

    // A finished run offers Train again; its settings are editable for the next run.
    await expect(page.locator('#train-again'), 'Train again is offered').toBeVisible();
    await expect(page.locator('#train-again')).toBeEnabled();
    await expect(page.locator('#start'), 'a finished run cannot be continued').toBeDisabled();
    await expect(page.locator('#bar-run'), 'the status bar shows the finished run').toHaveText(/done · step 8\/8/);

    await expectAccessible(page, 'after a run');
    await page.setViewportSize({ width: 390, height: 900 });
    await expectNoHorizontalScroll(page, 390);
    for (const id of ['spec-run', 'export', 'train-again']) {
      const box = await page.locator(`#${id}`).boundingBox();
      expect(box && box.x >= 0 && box.x + box.width <= 390, `#${id} lies within 390 px`).toBe(true);
    }
    await page.setViewportSize({ width: 1280, height: 900 });

    trained = true;
    console.log(
      `[lab] trained ${done.step} steps: loss ${done.firstLoss} → ${done.loss}; ${done.committed} samples committed, ${done.acked} acked`,
    );
    await snapWidths(page, testInfo, 'trained');
  });

  test('speculative decoding with the trained draft is lossless', async () => {
    const testInfo = test.info();
    expect(trained, 'needs the trained lab of the first test').toBe(true);
    const s = await runSpeculative(page);
    expect(await page.locator('#spec-output span').count(), '#spec-output shows the tokens').toBeGreaterThan(0);
    trainedSpec = s;
    console.log(
      `[lab] trained draft: acceptance length ${s.acceptance}, ${s.tpsDraft} tokens/s with the draft, ${s.tpsTarget} target alone`,
    );
    // The speed against the target alone, said plainly (a slow-down on a software adapter is common).
    const speed = page.locator('#spec-speed');
    await expect(speed).toHaveAttribute('data-state', /^(faster|slower)$/);
    const ratio = Number(await speed.getAttribute('data-speedup'));
    expect(ratio, 'data-speedup = draft tokens/s ÷ target tokens/s').toBeCloseTo(Number(s.tpsDraft) / Number(s.tpsTarget), 6);
    await expect(speed).toContainText(ratio >= 1 ? /Speed-up: \d+\.\d\d× faster/ : /Slow-down: .* \d+\.\d\d× SLOWER than the target alone/);
    await snapWidths(page, testInfo, 'speculative');
  });

  test('speculative sampling: temperature, top-p, top-k and seed, checked; the same seed gives the same text', async () => {
    expect(trained, 'needs the trained lab of the first test').toBe(true);
    const stats = page.locator('#spec-stats');
    // Out of range: refused beside the panel, nothing decoded.
    await page.locator('#spec-temperature').fill('3');
    await page.locator('#spec-run').click();
    await expect(stats).toHaveAttribute('data-state', 'invalid');
    await expect(stats).toContainText(/Temperature: at most 2 \(got 3\)/);
    await expect(page.locator('#spec-temperature')).toHaveAttribute('aria-invalid', 'true');
    await page.locator('#spec-temperature').fill('0.8');
    await page.locator('#spec-top-k').fill('50');
    const sampled = async () => {
      await page.locator('#spec-run').click();
      await expect(stats).toHaveAttribute('data-state', /^(done|error)$/, { timeout: TRAIN_TIMEOUT });
      const d = await stats.evaluate((el: HTMLElement) => ({ ...el.dataset }) as Record<string, string>);
      expect(d.state, `#spec-stats: ${(await stats.textContent())?.trim()}`).toBe('done');
      return d;
    };
    const first = await sampled();
    expect(first.sampled, 'data-sampled').toBe('true');
    expect(first.lossless, 'a sampled run claims no token equality').toBe('undefined');
    await expect(stats).toContainText(/rejection rule, so the text is distributed exactly as sampling from the target alone/);
    expect(Number(first.acceptance)).toBeGreaterThanOrEqual(1);
    expect(await page.locator('#spec-output span').count(), 'streamed tokens').toBeGreaterThan(0);
    const second = await sampled();
    expect(second.text, 'the same seed: the same sampled text').toBe(first.text);
    // The README's screenshots: the trained lab with a sampled decode in the panel.
    await snapWidths(page, test.info(), 'speculative-sampled', true);
    await page.locator('#spec-seed').fill('2');
    await page.locator('#spec-temperature').fill('0');
    const greedy = await sampled();
    expect(greedy.sampled).toBe('false');
    expect(greedy.lossless, 'temperature 0 is greedy and exact again').toBe('true');
    console.log(`[lab] sampled at 0.8/top-k 50: acceptance length ${first.acceptance}: "${first.text.slice(0, 80)}"`);
  });

  test('export the draft, import it again, decode with the import', async () => {
    const testInfo = test.info();
    expect(trained, 'needs the trained lab of the previous test').toBe(true);
    // One zip, after a confirmation that names what is inside.
    await page.locator('#export').click();
    const dialog = page.locator('#export-dialog');
    await expect(dialog, 'a confirmation before the download').toBeVisible({ timeout: MINUTE });
    await expect(dialog).toContainText(/speclab-eagle3-draft-step8\.zip \(\S+ \S+\)/);
    for (const name of ['config.json', 'model.safetensors'])
      await expect(dialog.locator('#export-entries tr', { hasText: name }), `the dialog lists ${name} with its size`).toContainText(
        /\d+(\.\d+)? (B|KiB|MiB)/,
      );
    await snap(page, testInfo, 'export-dialog');
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: MINUTE }), page.locator('#export-confirm').click()]);
    await expect(dialog).toBeHidden();
    expect(download.suggestedFilename()).toBe('speclab-eagle3-draft-step8.zip');
    const zipPath = testInfo.outputPath('export', download.suggestedFilename());
    await download.saveAs(zipPath);
    expect(await download.failure(), 'the zip downloads').toBeNull();
    const zip = new ZipReader(new BlobReader(new Blob([await readFile(zipPath)])));
    for (const entry of await zip.getEntries()) {
      if (!entry.directory) exported.push({ name: entry.filename, buffer: Buffer.from(await entry.getData(new Uint8ArrayWriter())) });
    }
    await zip.close();
    expect(exported.map((f) => f.name).sort(), "the zip's entries").toEqual(['config.json', 'model.safetensors']);

    const config = JSON.parse(bytesOf(exported, 'config.json').toString('utf8')) as { architectures?: string[] };
    expect(config.architectures, 'an SGLang EAGLE3 draft config').toEqual(['LlamaForCausalLMEagle3']);
    const header = safetensorsHeader(bytesOf(exported, 'model.safetensors'));
    expect(Object.keys(header).filter((k) => k !== '__metadata__').length, 'the export has tensors').toBeGreaterThan(0);

    // Import takes the loose files, as before…
    const paths: string[] = [];
    for (const f of exported) {
      const path = testInfo.outputPath('export', 'files', f.name);
      await mkdir(join(path, '..'), { recursive: true });
      await writeFile(path, f.buffer);
      paths.push(path);
    }
    await page.locator('#import-files').setInputFiles(paths);
    const importStatus = page.locator('#import-status');
    await expect(importStatus).toHaveAttribute('data-state', /^(ready|error)$/, { timeout: MINUTE });
    const state = await importStatus.getAttribute('data-state');
    expect(state, `#import-status: ${(await importStatus.textContent())?.trim()}`).toBe('ready');
    await snap(page, testInfo, 'imported');
    // …and the zip.
    await page.locator('#import-files').setInputFiles([zipPath]);
    await expect(importStatus, 'the zip imports').toHaveAttribute('data-state', 'ready', { timeout: MINUTE });

    // The imported draft is the trained one: same tokens, same acceptance on the same prompt.
    const s = await runSpeculative(page);
    if (trainedSpec) {
      expect(s.text, 'the imported draft decodes the same text').toBe(trainedSpec.text);
      expect(Number(s.acceptance), "the imported draft has the trained draft's acceptance length").toBeCloseTo(
        Number(trainedSpec.acceptance),
        6,
      );
    }
    await snap(page, testInfo, 'imported-speculative');
  });

  test('Train again starts a new run from a finished one; Stop (keyboard) keeps it resumable', async () => {
    const testInfo = test.info();
    expect(trained, 'needs the finished run of the first test').toBe(true);
    // 6 epochs (12 steps): Stop lands well before the end even on a fast adapter.
    await page.locator('#epochs').fill('6');
    await tabTo(page, 'train-again');
    await page.keyboard.press('Enter');
    await waitForPhase(page, ['training'], TRAIN_TIMEOUT);
    await expect(page.locator('#train-again'), 'a running run offers no Train again').toBeHidden();
    await tabTo(page, 'stop');
    await page.keyboard.press('Enter');
    const stopped = await waitForPhase(page, ['stopped'], TRAIN_TIMEOUT);
    expect(stopped.total, 'the new run has the new settings: 6 epochs × 8 prompts / batch 4').toBe(12);
    expect(stopped.step, 'stopped before the end').toBeLessThan(12);
    await expect(page.locator('#start'), 'the stopped run can be continued').toHaveText(/Continue \(step \d+ of 12\)/, { timeout: MINUTE });
    await snap(page, testInfo, 'train-again-stopped');
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
      expect
        .soft(reloaded.acked, 'after a reload, data-acked shows the durable ack: exactly the checkpointed steps × batch')
        .toBe(reloaded.step * settings['batch-size']);
      console.log(
        `[lab] reloaded at step ${stepAtUnload} of ${total}; saved run at step ${reloaded.step}, ${reloaded.acked} samples acked`,
      );
      // The curves come back from the run's own metrics, up to the last checkpoint (the step it continues after).
      const source = page.locator('#charts-source');
      await expect(source, 'the charts are restored from the saved run').toHaveAttribute('data-restored', String(reloaded.step), {
        timeout: MINUTE,
      });
      await expect(source).toContainText(`restored up to step ${reloaded.step}`);
      for (const id of ['chart-loss', 'chart-acc', 'chart-acceptance', 'chart-throughput']) {
        await expect(page.locator(`#${id} canvas`).first(), `#${id} is drawn again after the reload`).toBeVisible();
        await expect(page.locator(`.chart-numbers[data-for="${id}"] td`).first(), `#${id}'s table has its numbers back`).toHaveText(/\d/);
      }
      await snapWidths(page, testInfo, 'after-reload');

      await page.locator('#start').click();
      const done = await waitForPhase(page, ['done'], TRAIN_TIMEOUT);
      expect(done.total, 'data-total = epochs × prompts / batch').toBe(total);
      expect(done.step, 'data-step = data-total').toBe(done.total);
      const samples = settings.epochs * settings['train-prompts'];
      expect(done.acked, 'every sample acked exactly once').toBe(samples);
      expect(done.committed, 'every sample committed exactly once').toBe(samples);
      expect(done.resumable, 'a finished run is not resumable').toBe(false);
      // The restored steps and the continued ones make one curve: a point per step, none twice.
      await expect(page.locator('.chart-numbers[data-for="chart-loss"] td').first()).toHaveText(/\d/);
      expect(
        await page.evaluate(() => document.querySelector('#charts-source')?.getAttribute('data-source')),
        'the charts show this run',
      ).toBe('run');
      await snap(page, testInfo, 'continued');
      expectNoConsoleErrors(log);
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
      await page.evaluate(
        async (bytes) => {
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
        },
        [...sealed],
      );
      await page.reload();
      await expect(page.locator('#status'), 'the damaged run is reported').toHaveAttribute('data-damaged', 'true', { timeout: 3 * MINUTE });
      await expect(page.locator('#run-detail'), 'the message names the file and the check').toContainText(
        /speclab-lab\/run\.json: the saved run .* is damaged \(CRC-32/,
      );
      await expect(page.locator('#start'), 'nothing can continue a damaged run').toBeDisabled();
      await expect(page.locator('#discard'), 'Discard is offered').toBeEnabled();
      await snap(page, testInfo, 'damaged-run');
      await page.locator('#discard').click();
      await expect(page.locator('#status'), 'discarded').not.toHaveAttribute('data-damaged', 'true');
      await expect(page.locator('#start'), 'a new run can start').toBeEnabled({ timeout: MINUTE });
      expectNoConsoleErrors(log);
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
      await pickModel(
        page,
        testInfo,
        'truncated-weights',
        replace(files, 'model.safetensors', weights.subarray(0, Math.floor(weights.length / 2))),
      );
      await expectModelError(page, ['model.safetensors'], ['NopeForCausalLM']);
      await snap(page, testInfo, 'truncated-weights');

      // The panel recovers: the intact files load.
      await pickModel(page, testInfo, 'lab-target', files);
      const status = page.locator('#model-status');
      await expect(status).toHaveAttribute('data-state', /^(ready|loading)$/, { timeout: MINUTE });
      await expect(status).toHaveAttribute('data-state', /^(ready|error)$/, { timeout: 2 * MINUTE });
      expect(
        await status.getAttribute('data-state'),
        `#model-status after picking the intact lab target: ${(await status.textContent())?.trim()}`,
      ).toBe('ready');
      await snap(page, testInfo, 'model-ready');
      expectNoConsoleErrors(log);
    } finally {
      await attachConsole(testInfo, log);
    }
  });
});
