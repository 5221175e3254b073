/** Node entry of the `speclab` CLI (bin/speclab.mjs runs it through tsx). */
import { existsSync } from 'node:fs';
import { runCli } from '../cli/main.ts';
import { embedShaders, SHADERS_GEN_FILE } from './embed-shaders.ts';
import { nodePlatform } from './node.ts';

/**
 * A fresh clone without `npm run gen` has no src/kernels/shaders.gen.ts: generate it before a
 * command loads the kernels (help and version never need it). When that fails, one line says how.
 */
async function ensureShaders(): Promise<void> {
  if (existsSync(SHADERS_GEN_FILE)) return;
  try {
    console.error(embedShaders()); // the generator's report is not the command's output
  } catch (err) {
    console.error(`speclab: ${SHADERS_GEN_FILE} is missing and could not be generated (${(err as Error).message}); run \`npm run gen\``);
  }
}

const code = await runCli(nodePlatform, nodePlatform.args(), { beforeRun: ensureShaders });
await nodePlatform.exit(code);
