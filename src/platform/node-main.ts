/** Node entry of the `speclab` CLI (bin/speclab.mjs runs it through tsx). */
import { runCli } from '../cli/main.ts';
import { nodePlatform } from './node.ts';

const code = await runCli(nodePlatform, nodePlatform.args());
await nodePlatform.exit(code);
