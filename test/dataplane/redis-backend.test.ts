/**
 * The Redis backend's keys stay apart (src/dataplane/redis-backend.ts): every key of a partition is
 * `<prefix>{<partition>}:…`, so a partition name holding `}` could end the hash tag early and name
 * another partition's keys. The regression: registering partition `a}:s:r1` deleted the row of
 * sample `r1}:bytes` in partition `a` (its key `<prefix>{a}:s:r1}:bytes` is the first one's
 * `…:bytes`) and left `a`'s byte count wrong. Now such names are refused, by the client and by the
 * backend itself, and the other partition is untouched. Node-only (it runs redis-server).
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { StoreClient } from '../../src/dataplane/client.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { RedisBackend } from '../../src/dataplane/redis-backend.ts';
import { DataPlaneError, type DataPlaneClient, type HostTensor } from '../../src/dataplane/types.ts';
import type { RedisLink } from '../../src/ports/redis-link.ts';
import { nodeOnlyImport } from './backends.test.ts';
import { HOSTILE_NAMES } from './names.test.ts';

type RedisFixture = typeof import('./redis-fixture.ts');
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');

const row = (...values: number[]): HostTensor => ({ dtype: 'f32', shape: [values.length], data: Float32Array.from(values) });

export default defineSuite('dataplane/redis-backend', (t) => {
  const only = ['node'] as const;

  t.test(
    'a partition name with a hash-tag brace is refused and cannot delete a row of another partition or skew its bytes',
    async () => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('./redis-fixture.ts');
      const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
      const server = await startRedisServer();
      const clients: DataPlaneClient[] = [];
      try {
        const client = await createDataPlaneClient(
          { impl: 'transferQueue', backend: { kind: 'redis', url: server.url, keyPrefix: 'keys:' }, claimPollMs: 5 },
          { connectRedis: (url) => connectRedis(url) },
        );
        clients.push(client);
        await client.registerPartition({ partition: 'a', fields: { x: 'f32' }, consumerTasks: ['t'] });
        // Sample ids are free-form inside their own partition's hash tag.
        await client.putSamples({ partition: 'a', sampleIds: ['r1}:bytes', 'r2'], columns: { x: [row(1, 2), row(3)] } });
        const before = await client.partitionStats('a');
        assertEqual(before.bytesHeld, 12, 'bytes of partition a');

        await assertRejects(
          () => client.registerPartition({ partition: 'a}:s:r1', fields: { y: 'i32' }, consumerTasks: ['u'] }),
          /^registerPartition\.partition "a}:s:r1" is not a valid name/,
          'the colliding name through the client',
        );
        // The backend refuses it too, so no other caller of the backend can form the colliding key.
        const link = await connectRedis(server.url);
        const direct = new StoreClient(new RedisBackend(link, { keyPrefix: 'keys:' }), { claimPollMs: 5 });
        clients.push(direct);
        const backend = new RedisBackend(link, { keyPrefix: 'keys:' });
        await assertRejects(
          () => backend.register('a}:s:r1', { y: 'i32' }, ['u'], 'replace'),
          /^Redis register partition "a}:s:r1"/,
          'backend',
        );
        for (const bad of HOSTILE_NAMES)
          await assertRejects(() => backend.stats(bad), /^Redis stats partition /, `backend stats of ${JSON.stringify(bad)}`);

        const after = await client.partitionStats('a');
        assertDeepEqual(after, before, 'partition a is untouched');
        const read = await direct.getSamples({ partition: 'a', sampleIds: ['r1}:bytes', 'r2'], fields: ['x'] });
        assertDeepEqual(
          read.x.map((r) => [...(r as HostTensor).data]),
          [[1, 2], [3]],
          'both rows of partition a read back',
        );
        assertEqual(await client.clearSamples('a', { all: true }), 2, 'both rows clear');
        assertEqual((await client.partitionStats('a')).bytesHeld, 0, 'and the byte count returns to 0');
      } finally {
        for (const c of clients) await c.close();
        await server.stop();
      }
    },
    { only },
  );

  t.test(
    'a key prefix with a brace is refused (it would move the hash tag off the partition name)',
    () => {
      // Refused in the constructor, before the link is ever used.
      const link = {} as RedisLink;
      for (const keyPrefix of ['a{', 'b}', '{x}']) {
        const err = assertThrows(
          () => new RedisBackend(link, { keyPrefix }),
          /^Redis keyPrefix .* must be a string without \{ or \}$/,
          keyPrefix,
        );
        assert(err instanceof DataPlaneError && err.code === 'invalid_argument', `${keyPrefix}: invalid_argument`);
      }
    },
    { only },
  );

  t.test(
    'createOnly registers a new partition and refuses an existing one, even an empty one, leaving its schema',
    async () => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('./redis-fixture.ts');
      const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
      const server = await startRedisServer();
      const client = await createDataPlaneClient(
        { impl: 'transferQueue', backend: { kind: 'redis', url: server.url, keyPrefix: 'co' }, claimPollMs: 5 },
        { connectRedis: (url) => connectRedis(url) },
      );
      try {
        await client.registerPartition({ partition: 'fresh', fields: { x: 'f32' }, consumerTasks: ['t'], createOnly: true });
        await assertRejects(
          () => client.registerPartition({ partition: 'fresh', fields: { y: 'i32' }, consumerTasks: ['u'], createOnly: true }),
          /partition "fresh" is already registered \(createOnly refuses an existing partition\)/,
          'an existing empty partition',
        );
        assertDeepEqual((await client.partitionStats('fresh')).fields, { x: 'f32' }, 'the schema stays');
        await assertRejects(
          () =>
            client.registerPartition({ partition: 'fresh', fields: { x: 'f32' }, consumerTasks: ['t'], createOnly: true, replace: true }),
          /replace and createOnly exclude each other/,
          'both flags',
        );
      } finally {
        await client.close();
        await server.stop();
      }
    },
    { only },
  );
});
