/**
 * Node runner: `tsx test/runners/node.ts [filter]`. Dawn via the npm package `webgpu`.
 * Exits non-zero when any test failed or none ran.
 */
import { nodePlatform } from '../../src/platform/node.ts';
import { runSuites } from '../harness/run.ts';
import { suites } from '../suites.ts';
import { fileFixtures } from '../harness/fixtures-fs.ts';

const filter = nodePlatform.args()[0];
const summary = await runSuites(nodePlatform, suites, { filter, fixture: fileFixtures(nodePlatform) });
await nodePlatform.exit(summary.failed > 0 || summary.passed === 0 ? 1 : 0);
