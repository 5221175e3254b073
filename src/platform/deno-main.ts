/** Deno entry of the `speclab` CLI: `deno run -A src/platform/deno-main.ts <command>`. */
import { runCli } from '../cli/main.ts';
import { denoPlatform } from './deno.ts';

const code = await runCli(denoPlatform, denoPlatform.args());
await denoPlatform.exit(code);
