/**
 * Browser entry of the test suite: runs every suite with navigator.gpu and reports each line through
 * console.log (the Playwright runner relays it) and the final summary on `window.__speclabSummary`.
 */
import { browserPlatform } from '../../src/platform/browser.ts';
import { runSuites } from '../harness/run.ts';
import { suites } from '../suites.ts';

const logElement = document.getElementById('log')!;
logElement.textContent = '';
const filter = new URLSearchParams(location.search).get('filter') ?? undefined;

async function fixture(path: string): Promise<Uint8Array> {
  const response = await fetch(`/fixtures/${path}`);
  if (!response.ok) throw new Error(`fixture ${path}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

const summary = await runSuites(browserPlatform, suites, {
  filter,
  fixture,
  log: (line) => {
    console.log(line);
    logElement.textContent += `${line}\n`;
  },
});
(window as unknown as { __speclabSummary: unknown }).__speclabSummary = { passed: summary.passed, failed: summary.failed };
