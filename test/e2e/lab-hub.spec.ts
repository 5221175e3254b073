/**
 * A Hugging Face id in the lab (src/platform/browser-hub.ts, web/lab/hub-panel.ts), against a local
 * server that answers the Hub's API and file routes (test/platform/fake-hub.ts; no test reaches the
 * internet) for a gated copy of the lab target: refused without a token with one clear line; with the
 * token the weights start downloading and the tab is reloaded midway; the cached-models list then shows
 * the cut copy, and Resume asks only for the missing bytes (a Range request) and loads it; with the
 * server gone, the cached copy still loads; Remove clears it.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect, test, type Page } from '@playwright/test';
import { startFakeHub, type FakeHub } from '../platform/fake-hub.ts';
import { attachConsole, MINUTE, settle, watch } from './lab-helpers.ts';

const LAB_TARGET = fileURLToPath(new URL('../../assets/lab-target/', import.meta.url));
const REPO = 'speclab-test/lab-target';
const COMMIT = 'c0ffee'.padEnd(40, '0');
const TOKEN = 'hf_labtesttoken';
const CUT_AT = 1 << 20;

const modelStatus = (page: Page) => page.locator('#model-status');
const cacheList = (page: Page) => page.locator('#hub-cache-list');

async function loadId(page: Page, id: string, token: string): Promise<void> {
  await page.locator('#hub-id').fill(id);
  await page.locator('#hub-token').fill(token);
  await page.locator('#hub-load').click();
}

test('a Hugging Face id: refused without a token, a download cut by a reload resumed, loaded from the cache offline, removed', async ({
  page,
}, testInfo) => {
  const files: Record<string, Uint8Array> = {};
  for (const name of ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'])
    files[name] = await readFile(`${LAB_TARGET}${name}`);
  let hub: FakeHub | undefined = await startFakeHub({
    [REPO]: { files, commit: COMMIT, token: TOKEN, cut: { file: 'model.safetensors', at: CUT_AT, mode: 'stall' } },
  });
  const log = watch(page);
  try {
    await page.goto(`/?HF_ENDPOINT=${encodeURIComponent(hub.url)}`);
    await settle(page);
    await expect(cacheList(page)).toHaveAttribute('data-count', '0');

    // Gated: no token, one line that says what to do.
    await loadId(page, REPO, '');
    await expect(modelStatus(page)).toHaveAttribute('data-state', 'error', { timeout: MINUTE });
    await expect(modelStatus(page)).toContainText(`${REPO}: the Hub answered 401`);
    await expect(modelStatus(page)).toContainText('needs a token');
    // Not an id at all.
    await loadId(page, 'not an id', '');
    await expect(modelStatus(page)).toContainText('is not a Hugging Face model id');

    // With the token: the server sends 1 MiB of the weights, then stalls; the tab is reloaded mid-download.
    await loadId(page, REPO, TOKEN);
    await expect(modelStatus(page)).toContainText('downloading model.safetensors', { timeout: MINUTE });
    await page.waitForFunction((at) => Number(document.querySelector<HTMLProgressElement>('#model-progress')?.value) > at, CUT_AT, {
      timeout: MINUTE,
    });
    await page.reload();
    await settle(page);
    const entry = cacheList(page).locator(`li[data-repo="${REPO}"]`);
    await expect(entry).toHaveAttribute('data-complete', 'false');
    await expect(entry).toContainText('download cut');
    await page.locator('#hub-token').fill(TOKEN);
    await entry.getByRole('button', { name: `Resume ${REPO}` }).click();
    await expect(modelStatus(page)).toContainText(`${REPO}@${COMMIT}: LlamaForCausalLM`, { timeout: 3 * MINUTE });
    await expect(modelStatus(page)).toHaveAttribute('data-state', 'ready');
    const ranges = hub.log.filter((l) => l.startsWith(`GET /${REPO}/resolve/${COMMIT}/model.safetensors bytes=`));
    expect(ranges.length, `one resumed request for the weights; hub log:\n${hub.log.join('\n')}`).toBe(1);
    expect(Number(/bytes=(\d+)-/.exec(ranges[0])![1]), 'it resumes where the cut left off').toBeGreaterThan(0);
    await expect(entry).toHaveAttribute('data-complete', 'true');

    // The server gone: the cached copy loads with no network.
    await hub.close();
    hub = undefined;
    await page.reload();
    await settle(page);
    await entry.getByRole('button', { name: `Load ${REPO}` }).click();
    // Removing it while it loads (or once it is loaded) is refused: its files are being read.
    await entry.getByRole('button', { name: `Remove ${REPO} from this tab's cache` }).click();
    await expect(page.locator('#run-detail')).toContainText(/is loading: wait for it|is the loaded model/);
    // Its own ready line (the lab target's is already there, and "loading <id>" names the id too).
    await expect(modelStatus(page)).toContainText(`${REPO}@${COMMIT}: LlamaForCausalLM`, { timeout: 3 * MINUTE });
    await expect(modelStatus(page)).toHaveAttribute('data-state', 'ready');
    // The loaded model cannot be removed; after the lab target is loaded again, it can.
    await page.evaluate(() => (document.getElementById('run-detail')!.textContent = ''));
    await entry.getByRole('button', { name: `Remove ${REPO} from this tab's cache` }).click();
    await expect(page.locator('#run-detail')).toContainText('is the loaded model');
    await page.reload();
    await settle(page);
    await cacheList(page)
      .locator(`li[data-repo="${REPO}"]`)
      .getByRole('button', { name: `Remove ${REPO} from this tab's cache` })
      .click();
    await expect(cacheList(page)).toHaveAttribute('data-count', '0');

    // Console errors other than the refused and cut requests to the local Hub fail the test.
    const unexpected = log.errors.filter((e) => !/Failed to load resource|net::ERR_/.test(e) || !e.includes('127.0.0.1'));
    expect(unexpected, 'console errors and page errors').toEqual([]);
  } finally {
    await hub?.close();
    await attachConsole(testInfo, log);
  }
});
