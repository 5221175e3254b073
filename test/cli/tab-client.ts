/**
 * A browser tab's rollout, as a Node process: `runTabRollout` (src/training/cluster/tab-rollout.ts, what
 * web/rollout/worker.ts runs in a tab) over the WebSocket gateway of `speclab gateway`, with Dawn
 * for its GPU. The same code path as a tab on the same kind of adapter, so the features it commits
 * are byte-equal to a `speclab rollout` worker's and a run fed by it trains the same losses. The
 * crash matrix (test/cli/cluster-crash.ts) SIGKILLs the gateway under it.
 *
 *   tsx test/cli/tab-client.ts --gateway ws://127.0.0.1:P/ --token-file F --run NAME --target DIR
 *       [--batch N] [--poll-ms MS] [--worker-id ID] [--wait-ms MS]
 *
 * It prints one line when it joined, leased and committed, and when the run is finished (exit 0).
 * Anything that fails (the gateway gone mid-lease or mid-capture, a refused target) ends it with
 * exit 1 and one line naming the cause: it fails closed, its leases expire on the run's timeout.
 */
import process from 'node:process';
import { Gpu } from '../../src/gpu/gpu.ts';
import { nodeWebSocket } from '../../src/platform/dataplane-gateway-node.ts';
import { nodePlatform } from '../../src/platform/node.ts';
import { runTabRollout } from '../../src/training/cluster/tab-rollout.ts';
import { readGatewayToken } from '../../src/cli/gateway.ts';

const FLAGS = ['--gateway', '--token-file', '--run', '--target', '--batch', '--poll-ms', '--worker-id', '--wait-ms'] as const;
type Flag = (typeof FLAGS)[number];

function parse(argv: readonly string[]): Map<Flag, string> {
  const values = new Map<Flag, string>();
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i] as Flag;
    if (!FLAGS.includes(flag)) throw new Error(`unknown flag ${JSON.stringify(argv[i])} (flags: ${FLAGS.join(' ')})`);
    if (argv[i + 1] === undefined) throw new Error(`${flag}: needs a value`);
    values.set(flag, argv[i + 1]);
  }
  for (const flag of ['--gateway', '--token-file', '--run', '--target'] as const)
    if (!values.has(flag)) throw new Error(`${flag}: required`);
  return values;
}

function int(values: Map<Flag, string>, flag: Flag, fallback: number): number {
  const text = values.get(flag);
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${flag}: ${JSON.stringify(text)} is not a positive integer`);
  return n;
}

async function main(): Promise<number> {
  const values = parse(process.argv.slice(2));
  const run = values.get('--run')!;
  const token = await readGatewayToken(nodePlatform, values.get('--token-file')!);
  const ctx = await nodePlatform.acquireGpu();
  const gpu = new Gpu(ctx);
  let name = values.get('--worker-id') ?? 'tab';
  let total = 0;
  try {
    const result = await runTabRollout({
      gatewayUrl: values.get('--gateway')!,
      token,
      run,
      WebSocket: nodeWebSocket,
      targetFiles: nodePlatform.files(values.get('--target')!),
      gpu,
      batch: int(values, '--batch', 4),
      pollMs: int(values, '--poll-ms', 100),
      workerId: values.get('--worker-id'),
      waitMs: int(values, '--wait-ms', 60_000),
      onEvent: (e) => {
        if (e.kind === 'joined') {
          name = e.workerId;
          console.log(
            `tab ${name}: joined run ${run} via ${values.get('--gateway')} (aux layers [${e.auxLayerIds.join(', ')}], features ${e.featurePrecision}, prompt lease ${e.leaseMs} ms)`,
          );
        } else if (e.kind === 'leased') console.log(`tab ${name}: leased ${e.taskIds.length} (${e.taskIds.join(' ')})`);
        else if (e.kind === 'committed')
          console.log(`tab ${name}: committed ${e.sampleIds.length} (total ${(total += e.sampleIds.length)})`);
      },
    });
    console.log(`tab ${result.workerId}: the run is finished; committed ${result.committed} samples`);
    return 0;
  } finally {
    gpu.destroy();
    ctx.destroy();
  }
}

let code: number;
try {
  code = await main();
} catch (err) {
  console.error(`tab-client: ${(err as Error).message}`);
  code = 1;
}
await nodePlatform.exit(code);
