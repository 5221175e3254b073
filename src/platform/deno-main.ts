/** Deno entry of the `speclab` CLI: `deno run -A src/platform/deno-main.ts <command>`. */
import { runCli } from '../cli/main.ts';
import { denoPlatform } from './deno.ts';
import { embedShaders, SHADERS_GEN_FILE } from './embed-shaders.ts';

/**
 * A fresh clone without `npm run gen` has no src/kernels/shaders.gen.ts: generate it before a
 * command loads the kernels (help and version never need it). When that fails, one line says how.
 */
async function ensureShaders(): Promise<void> {
  try {
    Deno.statSync(SHADERS_GEN_FILE);
    return;
  } catch {
    // missing: generate it below
  }
  try {
    console.error(embedShaders()); // the generator's report is not the command's output
  } catch (err) {
    console.error(`speclab: ${SHADERS_GEN_FILE} is missing and could not be generated (${(err as Error).message}); run \`npm run gen\``);
  }
}

const code = await runCli(denoPlatform, denoPlatform.args(), { beforeRun: ensureShaders });
await denoPlatform.exit(code);
