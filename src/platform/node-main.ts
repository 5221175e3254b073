/** Node entry of the `speclab` CLI (bin/speclab.mjs runs it through tsx). */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runCli } from '../cli/main.ts';
import { nodePlatform } from './node.ts';

const SHADERS = new URL('../kernels/shaders.gen.ts', import.meta.url);

/**
 * A fresh clone without `npm run gen` has no src/kernels/shaders.gen.ts: generate it before a
 * command loads the kernels (help and version never need it). When that fails, one line says how.
 */
async function ensureShaders(): Promise<void> {
  if (existsSync(SHADERS)) return;
  const log = console.log;
  console.log = console.error; // the generator's report is not the command's output
  try {
    await import('../../scripts/embed-shaders.ts');
  } catch (err) {
    console.error(
      `speclab: ${fileURLToPath(SHADERS)} is missing and could not be generated (${(err as Error).message}); run \`npm run gen\``,
    );
  } finally {
    console.log = log;
  }
}

const code = await runCli(nodePlatform, nodePlatform.args(), { beforeRun: ensureShaders });
await nodePlatform.exit(code);
