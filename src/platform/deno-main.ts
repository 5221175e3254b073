/** Deno entry of the `speclab` CLI: `deno run -A src/platform/deno-main.ts <command>`. */
import { runCli } from '../cli/main.ts';
import { denoPlatform } from './deno.ts';

const SHADERS = new URL('../kernels/shaders.gen.ts', import.meta.url);

/**
 * A fresh clone without `npm run gen` has no src/kernels/shaders.gen.ts: generate it before a
 * command loads the kernels (help and version never need it). When that fails, one line says how.
 */
async function ensureShaders(): Promise<void> {
  try {
    Deno.statSync(SHADERS);
    return;
  } catch {
    // missing: generate it below
  }
  const log = console.log;
  console.log = console.error; // the generator's report is not the command's output
  try {
    await import('../../scripts/embed-shaders.ts');
  } catch (err) {
    console.error(`speclab: ${SHADERS.pathname} is missing and could not be generated (${(err as Error).message}); run \`npm run gen\``);
  } finally {
    console.log = log;
  }
}

const code = await runCli(denoPlatform, denoPlatform.args(), { beforeRun: ensureShaders });
await denoPlatform.exit(code);
