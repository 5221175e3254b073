/**
 * Conversations in the lab (web/lab/worker-conversations.ts, web/lab/data-panel.ts): a chat file
 * dropped on the page is read in the worker with the lab target's chat template, as `speclab train
 * --data` reads it. A file with a malformed row is refused naming the file and line; the bundled
 * sample (assets/conversations/sample.jsonl) shows its summary with the rows it skips by line; the
 * visitor chooses the held-out rows; the run trains on it to an export; a reload restores the file,
 * its held-out choice and the finished run. All of it on the least capable device WebGPU allows: default
 * limits, no optional feature, compatibility mode (?SPECLAB_DEFAULT_LIMITS=1&SPECLAB_FEATURE_LEVEL=compatibility).
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { BlobReader, Uint8ArrayWriter, ZipReader } from '@zip.js/zip.js';
import { expect, test, type Page } from '@playwright/test';
import {
  applySettings,
  attachConsole,
  discardSavedRun,
  expectNoConsoleErrors,
  MINUTE,
  readStatus,
  safetensorsHeader,
  settle,
  snap,
  TRAIN_TIMEOUT,
  waitForPhase,
  watch,
} from './lab-helpers.ts';

const SAMPLE = fileURLToPath(new URL('../../assets/conversations/sample.jsonl', import.meta.url));

/** Drops one file on `selector` as a person dragging it from their desktop does (a DataTransfer with the File). */
async function dropFile(page: Page, selector: string, name: string, bytes: Buffer): Promise<void> {
  const dataTransfer = await page.evaluateHandle(
    ({ name, base64 }) => {
      const dt = new DataTransfer();
      dt.items.add(new File([Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))], name));
      return dt;
    },
    { name, base64: bytes.toString('base64') },
  );
  await page.dispatchEvent(selector, 'drop', { dataTransfer });
}

const dataStatus = (page: Page) => page.locator('#data-status');

test('at default limits in compatibility mode: conversations dropped into the lab, a bad row refused by line, trained to an export, restored after a reload', async ({
  page,
}, testInfo) => {
  const log = watch(page);
  try {
    // The least capable device WebGPU allows: its default limits, no optional feature, compatibility mode.
    await page.goto('/?SPECLAB_DEFAULT_LIMITS=1&SPECLAB_FEATURE_LEVEL=compatibility');
    await settle(page);
    await expect(page.locator('#adapter'), 'the lab runs on a compatibility-mode device').toContainText('feature level: compatibility');
    await expect(page.locator('#adapter'), 'with no optional feature').toContainText('features: none');
    await expect(page.locator('#adapter'), "at WebGPU's default binding limit").toContainText(
      `maxStorageBufferBindingSize=${128 * 2 ** 20}`,
    );
    await discardSavedRun(page);
    await expect(dataStatus(page), 'no conversations at first').toHaveAttribute('data-state', 'none');

    // Line 3 is not JSON: the whole file is refused, naming it and the line (as `speclab train --data` does).
    const sample = await readFile(SAMPLE);
    const lines = sample.toString('utf8').split('\n');
    const bad = Buffer.from([lines[0], lines[1], '{"conversations": [', ...lines.slice(2)].join('\n'));
    await dropFile(page, '#data-drop', 'chats-bad.jsonl', bad);
    await expect(dataStatus(page)).toHaveAttribute('data-state', 'error', { timeout: MINUTE });
    await expect(dataStatus(page), 'the refusal names the file and line').toContainText('chats-bad.jsonl:3: not valid JSON');
    await expect(page.locator('#data-held-out'), 'nothing loaded: no held-out choice').toBeDisabled();

    // A row with a field of the wrong type is refused by line too.
    const wrongField = Buffer.from([lines[0], '{"conversations": "hello"}'].join('\n'));
    await dropFile(page, '#data-drop', 'chats-field.jsonl', wrongField);
    await expect(dataStatus(page), 'the refusal names the file, line and field').toContainText(/chats-field\.jsonl:2: .*conversations/, {
      timeout: MINUTE,
    });

    // The bundled sample: read, with the rows it cannot train on skipped by line.
    await dropFile(page, '#data-drop', 'sample.jsonl', sample);
    await expect(dataStatus(page)).toHaveAttribute('data-state', 'ready', { timeout: MINUTE });
    await expect(dataStatus(page)).toHaveAttribute('data-file', 'sample.jsonl');
    const usable = Number(await dataStatus(page).getAttribute('data-usable'));
    const skipped = Number(await dataStatus(page).getAttribute('data-skipped'));
    expect(usable, 'usable conversations of the sample').toBeGreaterThanOrEqual(8);
    expect(skipped, 'the sample has rows with no reply or turns out of order').toBeGreaterThan(0);
    await expect(page.locator('#data-skipped li'), 'skipped rows are listed by file and line').toHaveCount(skipped);
    await expect(page.locator('#data-skipped'), 'the row with no assistant turn').toContainText(/sample\.jsonl:\d+: .*assistant/);
    await expect(page.locator('#data-summary'), 'the chat template that rendered it').toContainText('chat template');

    // The held-out rows: the last 3; the rest train (and the memory plan follows).
    await page.locator('#data-held-out').fill('3');
    await page.locator('#data-held-out').dispatchEvent('change');
    await expect(dataStatus(page)).toHaveAttribute('data-held', '3');
    await expect(dataStatus(page)).toHaveAttribute('data-train', String(usable - 3));
    // A held-out count that leaves nothing to train on is refused, and the choice stays.
    await page.locator('#data-held-out').fill(String(usable));
    await page.locator('#data-held-out').dispatchEvent('change');
    await expect(dataStatus(page)).toContainText(`held-out conversations must be a whole number from 1 to ${usable - 1}`);
    await expect(dataStatus(page)).toHaveAttribute('data-held', '3');
    await expect(page.locator('#data-held-out'), 'the input shows the count in use again').toHaveValue('3');
    await expect(page.locator('#spec-prompt option'), 'the draft panel offers the held-out conversations').toHaveCount(3);

    // Train on it: 2 epochs of the training rows, batch 4.
    const train = usable - 3;
    await applySettings(page, {
      'train-prompts': 64,
      'response-length': 16,
      epochs: 2,
      'batch-size': 4,
      'ttt-length': 3,
      'rollout-workers': 1,
    });
    await page.locator('#start').click();
    const done = await waitForPhase(page, ['done'], TRAIN_TIMEOUT);
    const steps = Math.ceil((2 * train) / 4);
    expect(done.total, 'optimizer steps: 2 epochs of the training rows, batch 4').toBe(steps);
    expect(Number.isFinite(done.loss), 'a finite loss').toBe(true);
    await expect(page.locator('#eval-status'), 'scored on the held-out conversations').toHaveAttribute('data-sequences', '3');
    await expect(page.locator('#data-file'), 'a saved run fixes its data').toBeDisabled();
    await snap(page, testInfo, 'trained-on-conversations');

    // Export: the SGLang zip.
    await page.locator('#export').click();
    await expect(page.locator('#export-dialog')).toBeVisible({ timeout: MINUTE });
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: MINUTE }), page.locator('#export-confirm').click()]);
    expect(download.suggestedFilename()).toBe(`speclab-eagle3-draft-step${steps}.zip`);
    const zipPath = testInfo.outputPath(download.suggestedFilename());
    await download.saveAs(zipPath);
    const zip = new ZipReader(new BlobReader(new Blob([await readFile(zipPath)])));
    const entries = new Map<string, Buffer>();
    for (const e of await zip.getEntries()) if (!e.directory) entries.set(e.filename, Buffer.from(await e.getData(new Uint8ArrayWriter())));
    await zip.close();
    expect([...entries.keys()].sort()).toEqual(['config.json', 'model.safetensors']);
    const header = safetensorsHeader(entries.get('model.safetensors')!);
    expect(
      Object.keys(header).some((k) => k.startsWith('midlayer.')),
      'the draft layer is exported',
    ).toBe(true);

    // A reload restores the file, its held-out choice and the finished run.
    await page.reload();
    // A finished run leaves Start disabled (Train again is offered), so wait for the model, not for Start.
    await expect(page.locator('#model-status')).toHaveAttribute('data-state', 'ready', { timeout: 3 * MINUTE });
    await expect(dataStatus(page)).toHaveAttribute('data-state', 'ready', { timeout: MINUTE });
    await expect(dataStatus(page)).toHaveAttribute('data-file', 'sample.jsonl');
    await expect(dataStatus(page)).toHaveAttribute('data-held', '3');
    await expect(page.locator('#status')).toHaveAttribute('data-step', String(steps), { timeout: MINUTE });
    const after = await readStatus(page);
    expect(after.total, 'the saved run is the finished one').toBe(steps);
    await expect(page.locator('#train-again'), 'a finished run offers Train again').toBeVisible();

    // Discarding the run keeps the data; "Use the bundled prompts" removes it.
    await page.locator('#discard').click();
    await expect(page.locator('#status')).toHaveAttribute('data-total', '0');
    await expect(dataStatus(page)).toHaveAttribute('data-state', 'ready');
    await page.locator('#data-clear').click();
    await expect(dataStatus(page)).toHaveAttribute('data-state', 'none');
    await expect(page.locator('#spec-prompt option'), 'the bundled held-out prompts again').not.toHaveCount(3);
    expectNoConsoleErrors(log);
  } finally {
    await attachConsole(testInfo, log);
  }
});
