/**
 * Node's Redis link (src/platform/redis-node.ts) when its server fails under it, with a real
 * redis-server: a killed server makes the next call say which server and that the connection is
 * lost, keeping the client's error as the cause (it used to surface as ioredis' bare "Stream isn't
 * writeable and enableOfflineQueue options is false"); a frozen server (SIGSTOP) fails a call within
 * the command timeout, the calls after it fail at once instead of each waiting out the timeout,
 * closing takes at most its QUIT deadline, and after the thaw the same link works again.
 * Node-only (it runs redis-server); Node-only modules load at run time.
 */
import type { Suite } from '../harness/suite.ts';
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { nodeOnlyImport } from '../dataplane/backends.test.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';

type RedisFixture = typeof import('../dataplane/redis-fixture.ts');
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');

/** Imports resolve from test/dataplane/ (where nodeOnlyImport lives). */
const fixture = () => nodeOnlyImport<RedisFixture>('./redis-fixture.ts');
const platform = () => nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
const only = ['node'] as const;
const PING = "return redis.call('PING')";
const text = (reply: unknown) => new TextDecoder().decode(reply as Uint8Array);

const suite: Suite = defineSuite('platform/redis-node', (t) => {
  t.test(
    'messages name the server without its password; SPECLAB_REDIS_TIMEOUT_MS is checked',
    async () => {
      const { redisUrlForMessages, redisOptionsFromEnv } = await platform();
      assertEqual(redisUrlForMessages('redis://:s3cret@10.0.0.1:6379/0'), 'redis://:***@10.0.0.1:6379/0', 'password only');
      assertEqual(redisUrlForMessages('redis://me:s3cret@host/1'), 'redis://me:***@host/1', 'user and password');
      assertEqual(redisUrlForMessages('redis://127.0.0.1:6399/0'), 'redis://127.0.0.1:6399/0', 'no credentials');
      assertDeepEqual(
        redisOptionsFromEnv(() => undefined),
        {},
        'unset: the default',
      );
      assertDeepEqual(
        redisOptionsFromEnv(() => '2500'),
        { commandTimeoutMs: 2500 },
        'milliseconds',
      );
      for (const bad of ['0', '-1', '1.5', '30s'])
        assertThrows(() => redisOptionsFromEnv(() => bad), /^SPECLAB_REDIS_TIMEOUT_MS must be a positive whole number/, `"${bad}"`);
    },
    { only },
  );

  t.test(
    'a Redis killed under a client: the next call names its URL and says the connection is lost, keeping the cause',
    async () => {
      const { startRedisServer } = await fixture();
      const { connectRedis } = await platform();
      const server = await startRedisServer();
      const link = await connectRedis(server.url);
      const client = await createDataPlaneClient(
        { impl: 'transferQueue', backend: { kind: 'redis', url: server.url, keyPrefix: 'gone' }, claimPollMs: 5 },
        { connectRedis: (url) => connectRedis(url) },
      );
      try {
        assertEqual(text(await link.evalScript(PING, [], [])), 'PONG', 'alive');
        await client.registerPartition({ partition: 'p', fields: { x: 'i32' }, consumerTasks: ['t'] });
        await server.kill();
        const url = server.url.replace(/[/.]/g, '\\$&');
        const err = await assertRejects(
          () => link.evalScript(PING, [], []),
          new RegExp(`^Redis at ${url}: connection lost \\(.+\\)$`),
          'a script',
        );
        assert(err.cause instanceof Error, 'the client error is kept as the cause');
        await assertRejects(
          () => link.call!('CONFIG', ['GET', 'appendfsync']),
          new RegExp(`^Redis at ${url}: connection lost`),
          'a plain command',
        );
        await assertRejects(
          () => client.partitionStats('p'),
          new RegExp(`^Redis stats on partition "p" failed: Redis at ${url}: connection lost`),
          'a data-plane call names the operation, then the server',
        );
      } finally {
        await link.close();
        await client.close();
        await server.stop();
      }
    },
    { only },
  );

  t.test(
    'a frozen Redis: a call fails within the command timeout, the next ones at once, close within its deadline; after the thaw the link works',
    async () => {
      const { startRedisServer } = await fixture();
      const { connectRedis } = await platform();
      const server = await startRedisServer();
      const link = await connectRedis(server.url, { commandTimeoutMs: 500 });
      const spare = await connectRedis(server.url, { commandTimeoutMs: 500 });
      try {
        server.signal('SIGSTOP');
        let t0 = performance.now();
        await assertRejects(
          () => link.evalScript(PING, [], []),
          /^Redis at \S+: no answer within 500 ms, connection lost \(Command timed out\)$/,
          'frozen',
        );
        const first = performance.now() - t0;
        assert(first >= 450 && first < 3000, `the first call failed after ${first.toFixed(0)} ms`);
        t0 = performance.now();
        await assertRejects(() => link.evalScript(PING, [], []), /^Redis at \S+: /, 'the next call');
        const next = performance.now() - t0;
        assert(next < 600, `the next call failed after ${next.toFixed(0)} ms, not another timeout`);
        t0 = performance.now();
        await spare.close();
        assert(performance.now() - t0 < 2500, `close of an idle link to a frozen server took ${(performance.now() - t0).toFixed(0)} ms`);
        server.signal('SIGCONT');
        let answered = '';
        for (let i = 0; i < 100 && answered === ''; i++) {
          answered = await link.evalScript(PING, [], []).then(text, () => '');
          if (answered === '') await new Promise((r) => setTimeout(r, 100));
        }
        assertEqual(answered, 'PONG', 'the link reconnected after the thaw');
      } finally {
        server.signal('SIGCONT');
        await link.close();
        await spare.close();
        await server.stop();
      }
    },
    { only, timeoutMs: 60_000 },
  );
});

export default suite;
