/**
 * RedisRunRecord against a real redis-server: the run manifest is published once (the same one
 * again is fine, another is refused naming the differing field), a damaged manifest is refused,
 * and the finished flag is seen by another connection. Node-only (it runs redis-server).
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { RedisRunRecord, stableJson } from '../../src/control/redis/redis-run-record.ts';
import { controlKeys } from '../../src/control/redis/redis-keys.ts';

type RedisFixture = typeof import('../dataplane/redis-fixture.ts');
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');

function nodeOnlyImport<T>(specifier: string): Promise<T> {
  return import(/* @vite-ignore */ specifier) as Promise<T>;
}

export default defineSuite('control/redis-run-record', (t) => {
  t.test('stable JSON sorts keys at every level', () => {
    assertEqual(stableJson({ b: 1, a: { d: [2, { z: 1, y: 0 }], c: null } }), '{"a":{"c":null,"d":[2,{"y":0,"z":1}]},"b":1}', 'sorted');
  });

  t.test(
    'publish once, refuse another manifest by field, damaged manifest refused, finished seen by another link',
    async () => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
      const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
      const server = await startRedisServer();
      const [a, b] = [await connectRedis(server.url), await connectRedis(server.url)];
      try {
        const trainer = new RedisRunRecord(a, 'run-m');
        const rollout = new RedisRunRecord(b, 'run-m');
        assertEqual(await rollout.read(), undefined, 'nothing before publish');
        const manifest = { capture: { auxLayerIds: [1, 2, 3], featurePrecision: 'f32' }, run: 'run-m' };
        await trainer.publish(manifest);
        await trainer.publish({ run: 'run-m', capture: { featurePrecision: 'f32', auxLayerIds: [1, 2, 3] } });
        assertDeepEqual(await rollout.read(), manifest, 'read back on another link');
        await assertRejects(
          () => trainer.publish({ ...manifest, capture: { auxLayerIds: [1, 2, 4], featurePrecision: 'f32' } }),
          /another manifest for this run \(capture: .*\[1,2,3\].*→.*\[1,2,4\]/,
          'a different manifest names the field',
        );
        assertEqual(await rollout.finished(), false, 'not finished');
        await trainer.finish();
        assertEqual(await rollout.finished(), true, 'finished seen by the rollout');
        await trainer.publish(manifest);
        assertEqual(await rollout.finished(), false, 'a republish (resumed trainer) clears the flag');
        await a.evalScript(`redis.call('SET', KEYS[1], 'not json{') return 1`, [controlKeys('run-m').runManifest], []);
        await assertRejects(() => rollout.read(), /run:manifest is not valid JSON.*damaged/, 'damaged manifest');
        assert(!(await new RedisRunRecord(b, 'run-other').finished()), 'runs are separate');
      } finally {
        await a.close();
        await b.close();
        await server.stop();
      }
    },
    { only: ['node'] },
  );
});
