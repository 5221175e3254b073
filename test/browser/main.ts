/**
 * Browser entry of the test suite: runs every suite with navigator.gpu and reports each line through
 * console.log (the Playwright runner relays it) and the final summary on `window.__speclabSummary`.
 */
import { browserPlatform } from '../../src/platform/browser.ts';
import { runSuites } from '../harness/run.ts';
import { suites } from '../suites.ts';
import { gatewayRemoteConformance } from '../dataplane/gateway-browser.test.ts';

const logElement = document.getElementById('log')!;
logElement.textContent = '';
const params = new URLSearchParams(location.search);
const filter = params.get('filter') ?? undefined;
// A data-plane gateway to test against, when the runner was given one (SPECLAB_GATEWAY_URL/_TOKEN).
const gateway = params.get('gateway');
const gatewayToken = params.get('token');
const allSuites = gateway && gatewayToken ? [...suites, gatewayRemoteConformance(gateway, gatewayToken, 'browser')] : suites;

async function fixture(path: string): Promise<Uint8Array> {
  const response = await fetch(`/fixtures/${path}`);
  if (!response.ok) throw new Error(`fixture ${path}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

const summary = await runSuites(browserPlatform, allSuites, {
  filter,
  fixture,
  log: (line) => {
    console.log(line);
    logElement.textContent += `${line}\n`;
  },
});
(window as unknown as { __speclabSummary: unknown }).__speclabSummary = { passed: summary.passed, failed: summary.failed };
