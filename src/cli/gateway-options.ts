/**
 * `speclab gateway`'s flags and the runtime-neutral description of the server it asks its platform
 * for (`Platform.startGateway`, Node: src/platform/control-gateway-node.ts mounted on the data-plane
 * gateway). Pure: no sockets, no GPU code.
 */
import type { RolloutControl } from '../control/rollout-control.ts';
import type { RunRecordReader } from '../control/redis/redis-run-record.ts';
import type { GatewayScope, ScopedTokens } from '../dataplane/gateway-scopes.ts';
import type { DataPlaneClient } from '../dataplane/types.ts';
import { clusterUrl, runName } from './cluster-options.ts';
import { intSpec, textSpec, UsageError, type CommandDef, type ParsedArgs } from './options.ts';

export interface GatewayArgs {
  cluster: string;
  run: string;
  /** The token of every scope, or undefined when only scoped tokens are given. */
  tokenFile: string | undefined;
  /** Files of tokens that grant one scope each (src/dataplane/gateway-scopes.ts). */
  scopedTokenFiles: Partial<Record<GatewayScope, string>>;
  host: string;
  port: number;
  origins: string[] | undefined;
  waitMs: number;
}

export const GATEWAY_DEF: CommandDef = {
  name: 'gateway',
  summary:
    "WebSocket gateway of a cluster run for browser tabs: the run's data plane and the rollout endpoints of its control plane, behind a token",
  epilog: [
    "It waits for the trainer's run manifest, then serves until Ctrl-C (SIGINT/SIGTERM) and exits 0. Open the printed tab URL on the SpecLab site (web/rollout.html) to make a tab a rollout worker.",
    'Every connection must present a token (16..256 characters of [A-Za-z0-9_-]); with --origin, only pages of those origins may connect.',
    'The token of --token-file grants everything. Scoped tokens grant less: --rollout-token-file (what tabs need: register a new partition, put features, clear their own samples, the rollout control endpoints), --trainer-token-file (claim, ack, get, clear, stats; no put), --observer-token-file (stats only). Give at least one.',
    'exit codes: 0 stopped, 1 refused or failed, 2 usage error',
  ].join('\n'),
  options: [
    textSpec('--cluster', 'cluster', 'url', 'the Redis of the run, redis://host:port/db (the --cluster of its trainer)', undefined, true),
    textSpec('--run', 'run', 'name', 'the run id (the --run of its trainer)', undefined, true),
    textSpec('--token-file', 'tokenFile', 'file', 'a file holding a secret that grants every scope (its first line)'),
    textSpec(
      '--rollout-token-file',
      'rolloutTokenFile',
      'file',
      'a file holding the secret of rollout tabs (register a new partition, put, control)',
    ),
    textSpec(
      '--trainer-token-file',
      'trainerTokenFile',
      'file',
      "a file holding the secret of the run's consumer (claim, ack, get, clear, stats)",
    ),
    textSpec('--observer-token-file', 'observerTokenFile', 'file', 'a file holding the secret of an observer (stats only)'),
    textSpec('--host', 'host', 'addr', 'the address to listen on; anything but 127.0.0.1 exposes the run beyond this machine', '127.0.0.1'),
    intSpec('--port', 'port', { min: 0, max: 65_535 }, 'the port to listen on (0: a free one)', 8765),
    textSpec(
      '--origin',
      'origin',
      'origins',
      'comma-separated page origins allowed to connect, e.g. http://127.0.0.1:4173 (default: any page holding the token)',
    ),
    intSpec(
      '--wait-ms',
      'waitMs',
      { min: 0, max: 86_400_000 },
      "milliseconds to wait for the trainer's run manifest before giving up",
      60_000,
    ),
  ],
};

export function gatewayArgs(parsed: ParsedArgs): GatewayArgs {
  const v = parsed.values as {
    cluster: string;
    run: string;
    tokenFile?: string;
    rolloutTokenFile?: string;
    trainerTokenFile?: string;
    observerTokenFile?: string;
    host?: string;
    port?: number;
    origin?: string;
    waitMs?: number;
  };
  const host = v.host ?? '127.0.0.1';
  if (!/^[\w.:-]{1,253}$/.test(host)) throw new UsageError(`--host: ${JSON.stringify(host)} is not a host name or address`);
  let origins: string[] | undefined;
  if (v.origin !== undefined) {
    origins = v.origin.split(',').map((o) => o.trim());
    for (const o of origins) {
      let url: URL;
      try {
        url = new URL(o);
      } catch {
        throw new UsageError(`--origin: ${JSON.stringify(o)} is not an origin like http://host:port`);
      }
      if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== o)
        throw new UsageError(`--origin: ${JSON.stringify(o)} is not an origin like http://host:port (scheme, host and port only, no path)`);
    }
  }
  if (v.tokenFile === '') throw new UsageError('--token-file: needs a file name');
  const scopedTokenFiles: Partial<Record<GatewayScope, string>> = {};
  for (const [scope, file] of [
    ['rollout', v.rolloutTokenFile],
    ['trainer', v.trainerTokenFile],
    ['observer', v.observerTokenFile],
  ] as const) {
    if (file === undefined) continue;
    if (file.length === 0) throw new UsageError(`--${scope}-token-file: needs a file name`);
    scopedTokenFiles[scope] = file;
  }
  if (v.tokenFile === undefined && Object.keys(scopedTokenFiles).length === 0)
    throw new UsageError(
      'gateway needs --token-file, or at least one of --rollout-token-file, --trainer-token-file, --observer-token-file',
    );
  return {
    cluster: clusterUrl('--cluster', v.cluster),
    run: runName('--run', v.run),
    tokenFile: v.tokenFile,
    scopedTokenFiles,
    host,
    port: v.port ?? 8765,
    origins,
    waitMs: v.waitMs ?? 60_000,
  };
}

/** What a platform needs to serve a run's gateway. */
export interface GatewayServeOptions {
  /** Grants every scope. */
  readonly token?: string;
  /** One token per scope (rollout, trainer, observer). */
  readonly scopedTokens?: ScopedTokens;
  readonly host: string;
  readonly port: number;
  readonly allowedOrigins?: readonly string[];
  /** The server-side data-plane client of one connection (closed when it ends). */
  readonly openClient: () => Promise<DataPlaneClient>;
  /** The rollout endpoints of the run's DataFlowController that the gateway serves to tabs. */
  readonly controller: RolloutControl;
  readonly record: RunRecordReader;
  readonly promptLeaseMs: number;
  readonly onLog?: (line: string) => void;
}

export interface ServedGateway {
  readonly url: string;
  close(): Promise<void>;
}
