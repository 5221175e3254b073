/**
 * End-to-end test of the lab's "Draft insight" panel (web/lab/insight-view.ts, docs/insight.md): a
 * minimal training run (two optimizer steps), after which the panel holds the capture the worker
 * took automatically at the last step; then a held-out sample is requested from the keyboard-usable
 * controls. The attention table's column for each TTT step must sum to ~1 (these are the GPU's
 * probabilities), every TTT step has a heatmap and a top-k list per position, and the panel passes
 * the accessibility check. The screenshot goes to test-results/e2e/insight-1280.png.
 */
import { expect, test, type Page } from '@playwright/test';
import {
  applySettings,
  attachConsole,
  discardSavedRun,
  expectAccessible,
  expectNoConsoleErrors,
  openLab,
  TRAIN_TIMEOUT,
  waitForPhase,
  watch,
  type Settings,
} from './lab-helpers.ts';

/** 4 prompts × 1 epoch / batch 2 = 2 optimizer steps, TTT length 3. */
const MINI: Settings = { 'train-prompts': 4, 'response-length': 8, epochs: 1, 'batch-size': 2, 'ttt-length': 3, 'rollout-workers': 1 };
const TTT = MINI['ttt-length'];

/** Σ data-p of the attention table's cells for each TTT step. */
async function columnSums(page: Page): Promise<number[]> {
  return page.locator('#insight-attention td[data-step]').evaluateAll((cells, steps) => {
    const sums = new Array<number>(steps).fill(0);
    for (const c of cells as HTMLElement[]) sums[Number(c.dataset.step)] += Number(c.dataset.p);
    return sums;
  }, TTT);
}

test('draft insight: attention rows sum to 1 and top-k lists per TTT step after a short run', async ({ page }, testInfo) => {
  const log = watch(page);
  try {
    await openLab(page);
    await expectAccessible(page, 'at load, the insight panel empty');
    await discardSavedRun(page);
    await applySettings(page, MINI);
    await page.locator('#start').click();
    const done = await waitForPhase(page, ['done'], TRAIN_TIMEOUT);
    expect(done.step, 'the minimal run has two optimizer steps').toBe(2);

    const panel = page.locator('#insight');
    // The capture taken automatically after the last step.
    await expect(panel, 'the panel follows training: a capture of the last step').toHaveAttribute('data-step', '2', { timeout: 60_000 });
    await expect(page.locator('#insight-maps canvas'), 'one heatmap per TTT step').toHaveCount(TTT);

    // Ask for another held-out sample with the keyboard: focus the select, pick the next option.
    await page.locator('#insight-sample').focus();
    await page.keyboard.press('ArrowDown');
    await expect(panel, 'the requested sample is shown').toHaveAttribute('data-sample', '1', { timeout: 60_000 });
    await expect(page.locator('#insight-status')).toContainText('Held-out sample 1 after optimizer step 2');

    // Move the query position with the keyboard; the table follows (one more step-0 key per position).
    const slider = page.locator('#insight-query');
    await slider.focus();
    for (let i = 0; i < 3; i++) await page.keyboard.press('ArrowRight');
    await expect(slider).toHaveValue('3');
    await expect(page.locator('#insight-attention tbody tr'), '4 sequence keys + 2 own-state keys').toHaveCount(4 + TTT - 1);
    for (const [k, sum] of (await columnSums(page)).entries())
      expect(Math.abs(sum - 1), `TTT step ${k}: the query's probabilities sum to 1 (got ${sum})`).toBeLessThan(1e-4);
    // A single head instead of the mean: still a distribution.
    await page.locator('#insight-head').selectOption('1');
    for (const [k, sum] of (await columnSums(page)).entries())
      expect(Math.abs(sum - 1), `head 1, TTT step ${k}: sums to 1 (got ${sum})`).toBeLessThan(1e-4);
    // Own-state keys of later steps are not visible at step 0.
    await expect(page.locator('#insight-attention tbody tr').last().locator('td[data-step="0"]')).toHaveText('—');

    // Top-k per position and TTT step, beside the target token.
    const rows = page.locator('#insight-topk-table tbody tr');
    expect(await rows.count(), 'one row per real position').toBeGreaterThan(4);
    const first = rows.first();
    await expect(first.locator('td[data-step]'), 'a top-k cell per TTT step').toHaveCount(TTT);
    await expect(first.locator('td[data-step="0"] li'), 'the top-5 of step 0').toHaveCount(5);
    const probs = await first.locator('td[data-step="0"] li').evaluateAll((lis) => lis.map((li) => Number((li as HTMLElement).dataset.p)));
    expect(
      probs.every((p, i) => p > 0 && p <= 1 && (i === 0 || p <= probs[i - 1])),
      `top-k probabilities, most probable first: ${probs}`,
    ).toBe(true);
    await expectAccessible(page, 'with the insight panel');
    // A clip of the full page, the sticky status bar hidden: it would cover the panel's top.
    const clip = await page.locator('#insight-section').evaluate((el) => {
      const r = el.getBoundingClientRect();
      return { x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height };
    });
    await page.screenshot({ path: 'test-results/e2e/insight-1280.png', fullPage: true, clip, style: '.statusbar { visibility: hidden; }' });
    expectNoConsoleErrors(log);
  } finally {
    await attachConsole(testInfo, log);
  }
});
