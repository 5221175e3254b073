/**
 * Deno runner: `deno task test [filter]`. Deno's built-in WebGPU (wgpu).
 * Exits non-zero when any test failed or none ran.
 */
import { denoPlatform } from '../../src/platform/deno.ts';
import { runSuites } from '../harness/run.ts';
import { suites } from '../suites.ts';
import { fileFixtures } from '../harness/fixtures-fs.ts';

const filter = denoPlatform.args()[0];
const summary = await runSuites(denoPlatform, suites, { filter, fixture: fileFixtures(denoPlatform) });
await denoPlatform.exit(summary.failed > 0 || summary.passed === 0 ? 1 : 0);
