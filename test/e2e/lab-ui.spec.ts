/**
 * End-to-end tests of the lab page that need no training run: a phone-width screen (no horizontal
 * scroll, every control reachable with the keyboard, axe clean), and a `speclab train`
 * metrics.jsonl opened or dropped on the page. test/web/lab/cli-metrics.jsonl is the metrics.jsonl
 * of a real `speclab train` run on the lab target (8 prompts, 2 epochs, TTT 3, --eval-every 2).
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect, test, type Page } from '@playwright/test';
import {
  attachConsole,
  expectAccessible,
  expectNoConsoleErrors,
  expectNoHorizontalScroll,
  openLab,
  snapWidths,
  watch,
} from './lab-helpers.ts';

const CLI_METRICS = fileURLToPath(new URL('../web/lab/cli-metrics.jsonl', import.meta.url));

/** The ids of the controls Tab visits from the top of the page, in order (one lap). */
async function tabOrder(page: Page, limit = 80): Promise<string[]> {
  await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
  const seen: string[] = [];
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press('Tab');
    const id = await page.evaluate(() => document.activeElement?.id || document.activeElement?.tagName.toLowerCase() || '');
    if (seen.includes(id) && id !== 'summary' && id !== 'a') break;
    seen.push(id);
  }
  return seen;
}

test.describe('lab page without a run', () => {
  test('at 390 px: no horizontal scroll, every control reachable with the keyboard, no serious axe violations', async ({
    page,
  }, testInfo) => {
    const log = watch(page);
    try {
      await page.setViewportSize({ width: 390, height: 844 });
      await openLab(page);
      await expectNoHorizontalScroll(page, 390);
      const order = await tabOrder(page);
      for (const id of [
        'ttt-length',
        'draft-vocab',
        'batch-size',
        'lr',
        'rollout-workers',
        'epochs',
        'train-prompts',
        'response-length',
        'start',
        'spec-prompt',
        'metrics-file',
        'model-files',
        'model-files-flat',
        'model-url',
        'model-url-load',
        'import-files',
      ]) {
        expect(order, `Tab reaches #${id} (order: ${order.join(', ')})`).toContain(id);
        const box = await page.locator(`#${id}`).boundingBox();
        expect(box && box.x >= 0 && box.x + box.width <= 390, `#${id} lies within 390 px`).toBe(true);
      }
      await expectAccessible(page, 'at 390 px');
      // The status bar stays in view when the page is scrolled to its end.
      await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
      await expect
        .poll(async () => (await page.locator('#statusbar').boundingBox())?.y, 'the status bar sticks to the top')
        .toBeLessThan(5);
      await expect(page.locator('#bar-model')).toContainText('lab-target');
      await page.evaluate(() => window.scrollTo(0, 0));
      // An invalid setting at 390 px: the message wraps beside the input, nothing scrolls sideways.
      await page.locator('#train-prompts').fill('1000');
      await expect(page.locator('#train-prompts-error')).toHaveText(/Training prompts: at most 256 \(got 1000\)/);
      await expect(page.locator('#start')).toBeDisabled();
      await expectNoHorizontalScroll(page, 390);
      await page.locator('#train-prompts').fill('8');
      await expect(page.locator('#start')).toBeEnabled();
      await snapWidths(page, testInfo, 'at-load');
      expectNoConsoleErrors(log);
    } finally {
      await attachConsole(testInfo, log);
    }
  });

  test('a speclab train metrics.jsonl, picked or dropped, draws the charts; a bad one is refused naming the line', async ({
    page,
  }, testInfo) => {
    const log = watch(page);
    try {
      await openLab(page);
      const text = await readFile(CLI_METRICS, 'utf8');
      const trainLines = text.split('\n').filter((l) => l.includes('"phase":"train"')).length;
      const evalLines = text.split('\n').filter((l) => l.includes('"phase":"eval"')).length;
      await page.locator('#metrics-file').setInputFiles({ name: 'metrics.jsonl', mimeType: 'application/json', buffer: Buffer.from(text) });
      const status = page.locator('#metrics-status');
      await expect(status).toHaveAttribute('data-state', 'ready');
      await expect(status).toHaveAttribute('data-steps', String(trainLines));
      await expect(status).toContainText(`${evalLines} held-out evaluations`);
      await expect(page.locator('#charts-source')).toHaveAttribute('data-source', 'file');
      for (const id of ['chart-loss', 'chart-acc', 'chart-acceptance', 'chart-eval', 'chart-accept-rate', 'chart-throughput']) {
        await expect(page.locator(`#${id} canvas`).first(), `#${id} is drawn from the file`).toBeVisible();
        await expect(page.locator(`.chart-numbers[data-for="${id}"] td`).first(), `#${id}'s table shows the file's numbers`).toHaveText(
          /\d/,
        );
      }
      // The file's 3 draft positions rebuilt the charts (the page starts with 4): one plot per chart, not two.
      for (const id of ['chart-loss', 'chart-acc', 'chart-eval', 'chart-accept-rate'])
        await expect(page.locator(`#${id} .uplot`), `#${id} holds one plot`).toHaveCount(1);
      await expect(page.locator('.chart-numbers[data-for="chart-loss"] .swatch'), 'a row per draft position of the file').toHaveCount(3);
      // The CLI logs no queue or feature-store status: those charts stay empty, not made up.
      await expect(page.locator('.chart-numbers[data-for="chart-queue"] td').first()).toHaveText('—');
      const last = JSON.parse(
        text
          .split('\n')
          .filter((l) => l.includes('"phase":"train"'))
          .pop()!,
      ) as { plosses: number[] };
      await expect(page.locator('.chart-numbers[data-for="chart-loss"] tr', { hasText: 'loss k=0' }).locator('td')).toHaveText(
        last.plosses[0].toFixed(2),
      );
      await snapWidths(page, testInfo, 'metrics-file');

      // A bad line fails naming the file and the line.
      const lines = text.split('\n');
      lines[2] = '{"phase": "train", "step": 1,';
      await page
        .locator('#metrics-file')
        .setInputFiles({ name: 'broken.jsonl', mimeType: 'application/json', buffer: Buffer.from(lines.join('\n')) });
      await expect(status).toHaveAttribute('data-state', 'error');
      await expect(status).toContainText('broken.jsonl line 3: not JSON');

      // Dropped on the page, the file draws the charts too.
      await page.evaluate((body) => {
        const dt = new DataTransfer();
        dt.items.add(new File([body], 'dropped-metrics.jsonl'));
        document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
      }, text);
      await expect(status).toHaveAttribute('data-state', 'ready');
      await expect(status).toContainText('dropped-metrics.jsonl');
      expectNoConsoleErrors(log);
    } finally {
      await attachConsole(testInfo, log);
    }
  });
});
