/**
 * Node entry of the bundled `speclab` CLI (scripts/gpu-bundle.sh, for machines without npm): the
 * bundle already holds the generated shaders, so unlike node-main.ts nothing is generated first.
 */
import { runCli } from '../cli/main.ts';
import { nodePlatform } from './node.ts';

const code = await runCli(nodePlatform, nodePlatform.args());
await nodePlatform.exit(code);
