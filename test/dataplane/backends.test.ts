/**
 * The conformance suite (test/dataplane/conformance.ts) instantiated for every adapter/backend,
 * each built through the config factory exactly as an application would.
 */
import type { Suite } from '../harness/suite.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { toHostRow } from '../../src/dataplane/column-store.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import type { DataPlaneClient } from '../../src/dataplane/types.ts';
import { conformanceSuite, type ConformanceEnv } from './conformance.ts';

/**
 * Loads a Node-only module at run time. The specifier is a variable on purpose: neither the
 * browser bundler nor Deno may follow it into node:child_process / ioredis.
 */
export function nodeOnlyImport<T>(specifier: string): Promise<T> {
  return import(/* @vite-ignore */ specifier) as Promise<T>;
}

function inProcessEnv(client: DataPlaneClient, gpu: Gpu | undefined, owned: Gpu | undefined): ConformanceEnv {
  return {
    client,
    // One process, one store: a second consumer simply shares the client.
    peer: async () => client,
    host: (row) => toHostRow(row, gpu, 'conformance read-back'),
    close: async () => {
      await client.close();
      owned?.destroy();
    },
  };
}

export const noopConformance: Suite = conformanceSuite('dataplane/conformance/noop', async (_ctx, gpu) => {
  const client = await createDataPlaneClient({ impl: 'noop', claimPollMs: 5 }, { gpu });
  return inProcessEnv(client, gpu, undefined);
});

export const localHostConformance: Suite = conformanceSuite('dataplane/conformance/local-host', async (_ctx, gpu) => {
  const client = await createDataPlaneClient(
    { impl: 'transferQueue', backend: { kind: 'local', columns: 'host' }, claimPollMs: 5 },
    { gpu },
  );
  return inProcessEnv(client, gpu, undefined);
});

export const localGpuConformance: Suite = conformanceSuite('dataplane/conformance/local-gpu', async (ctx, given) => {
  const owned = given ? undefined : new Gpu(ctx.gpu);
  const gpu = given ?? owned!;
  const client = await createDataPlaneClient(
    { impl: 'transferQueue', backend: { kind: 'local', columns: 'gpu' }, claimPollMs: 5 },
    { gpu },
  );
  return inProcessEnv(client, gpu, owned);
});

type RedisFixture = typeof import('./redis-fixture.ts');
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');

export const redisConformance: Suite = conformanceSuite(
  'dataplane/conformance/redis',
  async (_ctx, gpu) => {
    const { startRedisServer } = await nodeOnlyImport<RedisFixture>('./redis-fixture.ts');
    const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
    const server = await startRedisServer();
    const config = { impl: 'transferQueue', backend: { kind: 'redis', url: server.url, keyPrefix: 'conf' }, claimPollMs: 5 };
    const clients: DataPlaneClient[] = [];
    const open = async (): Promise<DataPlaneClient> => {
      const c = await createDataPlaneClient(config, { gpu, connectRedis: (url) => connectRedis(url) });
      clients.push(c);
      return c;
    };
    try {
      const client = await open();
      return {
        client,
        peer: open,
        host: (row) => toHostRow(row, gpu, 'conformance read-back'),
        close: async () => {
          for (const c of clients) await c.close();
          await server.stop();
        },
      };
    } catch (err) {
      await server.stop();
      throw err;
    }
  },
  { only: ['node'] },
);
