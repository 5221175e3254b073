/**
 * Deno runner: `deno task test [filter]`. Deno's built-in WebGPU (wgpu).
 * Exits non-zero when any test failed or none ran.
 */
import { denoPlatform } from '../../src/platform/deno.ts';
import { runSuites } from '../harness/run.ts';
import { suites } from '../suites.ts';
import { fileFixtures } from '../harness/fixtures-fs.ts';
import { gatewayRemoteConformance } from '../dataplane/gateway-browser.test.ts';

const filter = denoPlatform.args()[0];
// A running data-plane gateway to test against (test/dataplane/browser-gateway.ts --deno sets these).
const gatewayUrl = denoPlatform.env('SPECLAB_GATEWAY_URL');
const gatewayToken = denoPlatform.env('SPECLAB_GATEWAY_TOKEN');
const allSuites = gatewayUrl && gatewayToken ? [...suites, gatewayRemoteConformance(gatewayUrl, gatewayToken, 'deno')] : suites;
const summary = await runSuites(denoPlatform, allSuites, { filter, fixture: fileFixtures(denoPlatform) });
await denoPlatform.exit(summary.failed > 0 || summary.passed === 0 ? 1 : 0);
