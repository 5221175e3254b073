/** Builds the configured data-plane client; the only place that picks an adapter. */
import type { Gpu } from '../gpu/gpu.ts';
import { StoreClient } from './client.ts';
import { GpuColumnStore, HostColumnStore, PassthroughColumnStore, type ColumnStore } from './column-store.ts';
import { parseDataPlaneConfig } from './config.ts';
import { LocalBackend } from './local-backend.ts';
import { MetricsDataPlaneClient, type DataPlaneEvent } from './observability.ts';
import type { RedisLink } from '../ports/redis-link.ts';
import { RedisBackend } from './redis-backend.ts';
import { DataPlaneError, type DataPlaneClient } from './types.ts';

export interface DataPlaneDeps {
  /** Keeps local columns on the GPU, and lets the Redis backend accept GPU rows. */
  readonly gpu?: Gpu;
  /** Opens a Redis connection; supplied by the platform (src/platform/redis-node.ts `connectRedis`). */
  readonly connectRedis?: (url: string) => Promise<RedisLink>;
  /**
   * Backs the local transfer queue with another store (e.g. the GPU feature store) instead of the
   * built-in one chosen by `backend.columns`.
   */
  readonly columnStore?: ColumnStore;
  /** Observability sink (used when `observability.enabled`). */
  readonly onEvent?: (event: DataPlaneEvent) => void;
}

export async function createDataPlaneClient(config: unknown, deps: DataPlaneDeps = {}): Promise<DataPlaneClient> {
  const cfg = parseDataPlaneConfig(config);
  let client: DataPlaneClient;
  if (cfg.impl === 'noop') {
    client = new StoreClient(new LocalBackend('noop', new PassthroughColumnStore()), { claimPollMs: cfg.claimPollMs });
  } else if (cfg.backend.kind === 'local') {
    const store = deps.columnStore ?? localStore(cfg.backend.columns, deps.gpu);
    client = new StoreClient(new LocalBackend(`transferQueue/local-${store.residency}`, store), { claimPollMs: cfg.claimPollMs });
  } else {
    if (!deps.connectRedis) {
      throw new DataPlaneError(
        'invalid_argument',
        'backend.kind "redis" needs deps.connectRedis (connectRedis from src/platform/redis-node.ts; Node only)',
      );
    }
    const link = await deps.connectRedis(cfg.backend.url);
    client = new StoreClient(new RedisBackend(link, { keyPrefix: cfg.backend.keyPrefix, gpu: deps.gpu }), { claimPollMs: cfg.claimPollMs });
  }
  if (cfg.observability?.enabled) {
    client = new MetricsDataPlaneClient(client, { onEvent: deps.onEvent, maxBytesOutstanding: cfg.observability.maxBytesOutstanding });
  }
  return client;
}

function localStore(columns: 'auto' | 'host' | 'gpu', gpu: Gpu | undefined): ColumnStore {
  if (columns === 'gpu' && !gpu) throw new DataPlaneError('invalid_argument', 'backend.columns "gpu" needs deps.gpu');
  if (columns === 'gpu' || (columns === 'auto' && gpu)) return new GpuColumnStore(gpu!);
  return new HostColumnStore(gpu);
}
