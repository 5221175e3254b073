/**
 * What a data-plane caller sees when Redis itself fails: a server that is gone, one that never was,
 * and one that is frozen. Each surfaces as a DataPlaneError `unavailable` naming the operation and
 * partition, promptly, never as a raw client error or a call that hangs. Node-only (it runs
 * redis-server); Node-only modules load at run time.
 */
import type { Suite } from '../harness/suite.ts';
import { defineSuite } from '../harness/suite.ts';
import { assert, assertEqual } from '../harness/assert.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { DataPlaneError, type DataPlaneClient } from '../../src/dataplane/types.ts';
import { nodeOnlyImport } from './backends.test.ts';

type RedisFixture = typeof import('./redis-fixture.ts');
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');

async function failure(call: () => Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  try {
    await call();
  } catch (error) {
    return { error, ms: performance.now() - started };
  }
  throw new Error('the call succeeded, but it should have failed');
}

function assertUnavailable(error: unknown, pattern: RegExp, what: string): void {
  assert(error instanceof DataPlaneError, `${what}: a DataPlaneError, got ${String(error)}`);
  assertEqual((error as DataPlaneError).code, 'unavailable', `${what}: code`);
  assert(pattern.test((error as Error).message), `${what}: message ${JSON.stringify((error as Error).message)} matches ${pattern}`);
}

const suite: Suite = defineSuite('dataplane/redis-failures', (t) => {
  const only = ['node'] as const;
  const open = async (commandTimeoutMs?: number) => {
    const { startRedisServer } = await nodeOnlyImport<RedisFixture>('./redis-fixture.ts');
    const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
    const server = await startRedisServer();
    const client: DataPlaneClient = await createDataPlaneClient(
      { impl: 'transferQueue', backend: { kind: 'redis', url: server.url, keyPrefix: 'fail' }, claimPollMs: 5 },
      { connectRedis: (url) => connectRedis(url, { commandTimeoutMs }) },
    );
    await client.registerPartition({ partition: 'p', fields: { x: 'i32' }, consumerTasks: ['t'] });
    return { server, client };
  };

  t.test(
    'a killed Redis fails the next call as unavailable, naming the operation and partition',
    async () => {
      const { server, client } = await open();
      await server.stop();
      const { error } = await failure(() => client.partitionStats('p'));
      assertUnavailable(error, /Redis stats on partition "p" failed/, 'stats after the kill');
      await client.close();
    },
    { only },
  );

  t.test(
    'a Redis that is not there fails the connect as unavailable, naming the address',
    async () => {
      const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
      const { error } = await failure(() => connectRedis('redis://127.0.0.1:1/0', { connectTimeoutMs: 1000 }));
      assertUnavailable(error, /Redis at redis:\/\/127\.0\.0\.1:1\/0: could not connect/, 'connect to a closed port');
    },
    { only },
  );

  t.test(
    'a frozen Redis fails a call within the command timeout instead of blocking it',
    async () => {
      const { server, client } = await open(500);
      try {
        server.signal('SIGSTOP');
        const { error, ms } = await failure(() => client.partitionStats('p'));
        assertUnavailable(error, /Redis stats on partition "p" failed: .*timed out/i, 'stats on a frozen server');
        assert(ms < 5000, `failed after ${ms.toFixed(0)} ms, within a few command timeouts`);
      } finally {
        server.signal('SIGCONT');
        await client.close();
        await server.stop();
      }
    },
    { only },
  );
});

export default suite;
