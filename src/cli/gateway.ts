/**
 * `speclab gateway --cluster redis://… --run NAME --token-file F [--port P] [--origin O]`: the
 * WebSocket gateway through which browser tabs are rollout workers of a cluster run
 * (docs/control-plane.md "Browser tabs as rollout workers"). One port serves two subprotocols
 * behind the token and Origin checks (a --token-file token grants every scope; --rollout-,
 * --trainer- and --observer-token-file tokens one each: src/dataplane/gateway-scopes.ts): the
 * run's data plane (`speclab-dataplane.v1`, each connection its own Redis data-plane client with
 * the trainer's key prefix) and the rollout endpoints of the run's control plane
 * (`speclab-control.v1`: register, heartbeat, lease prompts, commit refs),
 * served by a passive `DataFlowController` over the run's Redis control stores, built as
 * `speclab rollout` builds its own (the manifest's prompt lease, commits not enqueued: the trainer
 * enqueues each round).
 *
 * It waits for the trainer's manifest (it needs the run's prompt lease), prints its address and the
 * tab URL fragment, and serves until SIGINT/SIGTERM (exit 0). Sockets come from the platform
 * (`Platform.startGateway`, Node).
 */
import { DataFlowController } from '../control/controller.ts';
import { openRedisControlStores } from '../control/redis/redis-control-stores.ts';
import { RedisRunRecord, type RunManifest } from '../control/redis/redis-run-record.ts';
import { createDataPlaneClient } from '../dataplane/factory.ts';
import { TOKEN_PATTERN } from '../dataplane/gateway-protocol.ts';
import type { GatewayScope } from '../dataplane/gateway-scopes.ts';
import { FEATURE_KEY_PREFIX, redisConnector } from '../training/run/cluster-run.ts';
import type { GatewayArgs } from './gateway-options.ts';
import type { Platform } from './platform.ts';
import { speclabCommand } from '../util/cli-command.ts';
import { READ_BUDGETS } from '../ports/read-budget.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The token: the first line of the file, which must be 16..256 characters of [A-Za-z0-9_-]. */
export async function readGatewayToken(platform: Platform, path: string, flag = '--token-file'): Promise<string> {
  const slash = path.lastIndexOf('/');
  const files = platform.files(slash < 0 ? '.' : path.slice(0, slash) || '/');
  let bytes: Uint8Array;
  try {
    bytes = await files.read(slash < 0 ? path : path.slice(slash + 1), READ_BUDGETS.smallText);
  } catch (err) {
    throw new Error(`${flag}: cannot read ${path} (${(err as Error).message})`, { cause: err });
  }
  const token = new TextDecoder().decode(bytes).split(/\r?\n/)[0].trim();
  if (!TOKEN_PATTERN.test(token))
    throw new Error(
      `${flag}: the first line of ${path} must be a token of 16..256 characters of [A-Za-z0-9_-] (e.g. openssl rand -hex 32)`,
    );
  return token;
}

export async function runGateway(platform: Platform, args: GatewayArgs, print: (line: string) => void): Promise<number> {
  const start = platform.startGateway?.bind(platform);
  if (!start) throw new Error(`this runtime (${platform.name}) cannot serve WebSockets; speclab gateway needs Node (bin/speclab.mjs)`);
  const connect = redisConnector(platform, 'gateway');
  const token = args.tokenFile === undefined ? undefined : await readGatewayToken(platform, args.tokenFile);
  const scopedTokens: Partial<Record<GatewayScope, string>> = {};
  for (const [scope, file] of Object.entries(args.scopedTokenFiles) as [GatewayScope, string][])
    scopedTokens[scope] = await readGatewayToken(platform, file, `--${scope}-token-file`);
  const link = await connect(args.cluster);
  const cleanup: (() => Promise<void> | void)[] = [() => link.close()];
  let stop: () => void = () => {};
  let stopping = false;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const release = platform.onInterrupt?.(() => {
    stopping = true;
    stop();
  });
  try {
    const record = new RedisRunRecord(link, args.run);
    let manifest: RunManifest | undefined = await record.read();
    const deadline = performance.now() + args.waitMs;
    if (!manifest) print(`gateway: waiting up to ${args.waitMs} ms for the trainer of run ${args.run} on ${args.cluster}`);
    while (!manifest && !stopping) {
      if (performance.now() >= deadline)
        throw new Error(
          `--run ${args.run}: no trainer published this run on ${args.cluster} within ${args.waitMs} ms (--wait-ms); start ${speclabCommand('train')} --cluster ${args.cluster} --run ${args.run} first`,
        );
      await sleep(250);
      manifest = await record.read();
    }
    if (!manifest) {
      print(`gateway: stopped by an interrupt before the trainer of run ${args.run} published it`);
      return 0;
    }
    const promptLeaseMs = manifest.promptLeaseMs;
    if (typeof promptLeaseMs !== 'number' || !Number.isInteger(promptLeaseMs) || promptLeaseMs < 1)
      throw new Error(`run ${args.run}: its manifest has no valid promptLeaseMs (a record from another version, or damaged)`);
    // As speclab rollout: the trainer holds the durable marker; expired prompt leases return to the ledger.
    const stores = await openRedisControlStores(link, args.run, {
      url: args.cluster,
      requireDurable: false,
      prompts: { leaseTimeoutMs: promptLeaseMs },
    });
    const controller = DataFlowController.over(args.run, stores, { enqueueCommits: false });
    const gateway = await start({
      token,
      scopedTokens,
      host: args.host,
      port: args.port,
      allowedOrigins: args.origins,
      // Host rows only cross this gateway (tabs read their own GPU rows back before sending), so no GPU here.
      openClient: () =>
        createDataPlaneClient(
          { impl: 'transferQueue', backend: { kind: 'redis', url: args.cluster, keyPrefix: FEATURE_KEY_PREFIX }, claimPollMs: 5 },
          { connectRedis: connect },
        ),
      controller,
      record,
      promptLeaseMs,
      onLog: (line) => print(`gateway: ${line}`),
    });
    cleanup.push(() => gateway.close());
    const fragment = `gateway=${encodeURIComponent(gateway.url)}&run=${encodeURIComponent(args.run)}&token=<${token === undefined ? 'the rollout token' : 'the token'}>`;
    print(
      `gateway: serving run ${args.run} of ${args.cluster} at ${gateway.url} (data plane and rollout control; prompt lease ${promptLeaseMs} ms${args.origins ? `; origins ${args.origins.join(', ')}` : ''})`,
    );
    print(`gateway: open <SpecLab site>/rollout.html#${fragment} to add a tab as a rollout worker`);
    await stopped;
    print('gateway: stopped by an interrupt');
    return 0;
  } finally {
    release?.();
    for (const close of cleanup.reverse()) await Promise.resolve(close()).catch(() => undefined);
  }
}
