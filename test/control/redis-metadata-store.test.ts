/**
 * RedisMetadataStore against a real redis-server: the MetadataStore conformance contract, the
 * startup durability check, survival of a SIGKILL on an appendfsync-always server, refusal of a
 * damaged record, and atomic dedup across two connections. Node-only (it runs redis-server);
 * Node-only modules load at run time, so the browser bundle and Deno never import them.
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { RedisMetadataStore, type RedisMetadataStoreOptions } from '../../src/control/redis/redis-metadata-store.ts';
import { controlKeys } from '../../src/control/redis/redis-keys.ts';
import type { RedisLink } from '../../src/ports/redis-link.ts';
import type { SampleRef } from '../../src/contracts/records.ts';
import { sampleRef } from '../contracts/fixtures.ts';
import { nodeOnlyImport } from '../dataplane/backends.test.ts';
import { metadataStoreConformance } from './metadata-store-conformance.ts';

type RedisFixture = typeof import('../dataplane/redis-fixture.ts');
type RedisServer = Awaited<ReturnType<RedisFixture['startRedisServer']>>;
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');

const only = ['node'] as const;
let runs = 0;
/** A run id no other check has used, so checks never see each other's keys. */
const freshRun = (): string => `run-${Date.now().toString(36)}-${runs++}`;

async function startServer(options: Parameters<RedisFixture['startRedisServer']>[0] = {}): Promise<RedisServer> {
  const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
  return startRedisServer(options);
}

async function connect(server: RedisServer): Promise<RedisLink> {
  const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
  return connectRedis(server.url);
}

/** A store that owns a fresh link to `server`. */
async function openStore(server: RedisServer, runId: string, options: RedisMetadataStoreOptions = {}): Promise<RedisMetadataStore> {
  const link = await connect(server);
  try {
    return await RedisMetadataStore.open(link, runId, { url: server.url, ownsLink: true, ...options });
  } catch (err) {
    await link.close();
    throw err;
  }
}

async function rejection(call: () => Promise<unknown>): Promise<Error> {
  try {
    await call();
  } catch (err) {
    return err as Error;
  }
  throw new Error('the call succeeded, but it should have failed');
}

export default defineSuite('control/redis-metadata-store', (t) => {
  metadataStoreConformance(
    t,
    'redis',
    async () => {
      const server = await startServer({ durable: true });
      try {
        return { store: await openStore(server, freshRun()), cleanup: () => server.stop() };
      } catch (err) {
        await server.stop();
        throw err;
      }
    },
    { only },
  );

  t.test(
    'a server without appendonly + appendfsync always is refused in one line, unless opted out',
    async () => {
      const plain = await startServer();
      const durable = await startServer({ durable: true });
      try {
        const err = await rejection(() => openStore(plain, freshRun()));
        assert(!err.message.includes('\n'), `one line: ${JSON.stringify(err.message)}`);
        assert(/is not durable \(appendonly=no, appendfsync=everysec\)/.test(err.message), `names the config: ${err.message}`);
        assert(
          err.message.includes(plain.url) && err.message.includes('--appendonly yes --appendfsync always'),
          `names the server and the fix: ${err.message}`,
        );

        const optedOut = await openStore(plain, freshRun(), { requireDurable: false });
        assertDeepEqual(
          { ...optedOut.durability },
          { appendonly: false, appendfsync: 'everysec', durable: false },
          'opted-out store reports what it found',
        );
        assertEqual(await optedOut.commitSample(sampleRef('a')), true, 'opted-out store works');
        await optedOut.close();

        const ok = await openStore(durable, freshRun());
        assertDeepEqual({ ...ok.durability }, { appendonly: true, appendfsync: 'always', durable: true }, 'durable server passes');
        await ok.close();
      } finally {
        await plain.stop();
        await durable.stop();
      }
    },
    { only },
  );

  t.test(
    'commits and acks survive a SIGKILL of a durable server, restarted from its AOF',
    async () => {
      const first = await startServer({ durable: true });
      let last = first;
      const runId = freshRun();
      const refs = ['k0', 'k1', 'k2', 'k3'].map((id) => sampleRef(id));
      try {
        const store = await openStore(first, runId);
        await store.commitSamples([refs[2], refs[0]]);
        await store.commitSamples([refs[0], refs[1], refs[3]]);
        await store.recordTrainAck([refs[2].sampleId, refs[0].sampleId], { globalStep: 11, optimizerDurable: false });
        await store.recordTrainAck([refs[1].sampleId], { globalStep: null, optimizerDurable: true });
        const before = { ids: await store.allCommittedIds(), marker: await store.durableMarker() };
        await first.kill();
        await store.close();

        last = await startServer({ durable: true, dir: first.dir, port: first.port });
        const reopened = await openStore(last, runId);
        try {
          assertDeepEqual(
            await reopened.allCommittedIds(),
            [2, 0, 1, 3].map((i) => refs[i].sampleId),
            'commit order survives',
          );
          assertDeepEqual(before.ids, await reopened.allCommittedIds(), 'same ids as before the kill');
          assertDeepEqual(await reopened.getCommitted(refs[3].sampleId), refs[3], 'refs survive');
          const marker = await reopened.durableMarker();
          assertDeepEqual([...marker.acked].sort(), [...before.marker.acked].sort(), 'acked set survives');
          assertEqual(marker.acked.size, 3, 'three acked');
          assertEqual(marker.globalStep, 11, 'step survives (the null-step ack left it)');
          assertEqual(marker.optimizerDurable, true, 'last durable flag survives');
          assertEqual(await reopened.commitSample(refs[1]), false, 'dedup still holds after the restart');
        } finally {
          await reopened.close();
        }
      } finally {
        await last.stop();
      }
    },
    { only },
  );

  t.test(
    'a damaged stored ref is refused with an error naming the key and sample id',
    async () => {
      const server = await startServer({ durable: true });
      const runId = freshRun();
      try {
        const store = await openStore(server, runId);
        const good = sampleRef('intact');
        const [garbled, wrongShape] = [sampleRef('garbled'), sampleRef('wrong-shape')];
        await store.commitSamples([good, garbled, wrongShape]);
        const refsKey = controlKeys(runId).metaRefs;
        const overwrite = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1";
        const link = await connect(server);
        await link.evalScript(overwrite, [refsKey], [garbled.sampleId, '{"sampleId": "garbled", oops']);
        await link.evalScript(overwrite, [refsKey], [wrongShape.sampleId, JSON.stringify({ ...wrongShape, numTokens: 'many' })]);
        await link.close();

        const notJson = await rejection(() => store.getCommitted(garbled.sampleId));
        assert(
          notJson.message.includes(`${refsKey} ${garbled.sampleId}: the stored ref is not valid JSON`),
          `names key and id: ${notJson.message}`,
        );
        const badSchema = await rejection(() => store.getCommitted(wrongShape.sampleId));
        assert(
          badSchema.message.startsWith(`RedisMetadataStore ${refsKey} ${wrongShape.sampleId} is invalid`),
          `names key and id: ${badSchema.message}`,
        );
        assert(badSchema.message.includes('numTokens'), `names the bad field: ${badSchema.message}`);
        assertDeepEqual(await store.getCommitted(good.sampleId), good, 'an intact record still reads back');
        await store.close();
      } finally {
        await server.stop();
      }
    },
    { only },
  );

  t.test(
    'two stores on one run: concurrent commits of the same id report it fresh exactly once',
    async () => {
      const server = await startServer({ durable: true });
      const runId = freshRun();
      try {
        const [a, b] = [await openStore(server, runId), await openStore(server, runId)];
        const refs = Array.from({ length: 40 }, (_, i) => sampleRef(`race-${i}`));
        const next = (i: number): SampleRef => refs[(i + 1) % refs.length];
        // Every id is in four batches sent at once: two per store, in opposite orders.
        const batches = refs.flatMap((ref, i) => [
          { store: a, refs: [ref, next(i)] },
          { store: b, refs: [next(i), ref] },
        ]);
        const flags = await Promise.all(batches.map((batch) => batch.store.commitSamples(batch.refs)));
        const fresh = new Map<string, number>();
        batches.forEach((batch, j) =>
          batch.refs.forEach((ref, k) => {
            if (flags[j][k]) fresh.set(ref.sampleId, (fresh.get(ref.sampleId) ?? 0) + 1);
          }),
        );
        assert(
          refs.every((ref) => fresh.get(ref.sampleId) === 1),
          `each id fresh exactly once: ${JSON.stringify([...fresh])}`,
        );
        assertEqual(await a.committedCount(), refs.length, 'committed once each');
        assertDeepEqual((await b.allCommittedIds()).sort(), refs.map((r) => r.sampleId).sort(), 'order list holds each id once');
        await a.recordTrainAck([refs[0].sampleId], { globalStep: 5, optimizerDurable: true });
        assertEqual((await b.durableMarker()).globalStep, 5, 'the other store sees the ack (nothing cached)');
        await a.close();
        await b.close();
      } finally {
        await server.stop();
      }
    },
    { only },
  );

  t.test(
    'a run id that cannot be a hash tag is refused before anything is sent',
    async () => {
      const server = await startServer({ durable: true });
      try {
        await assertRejects(() => openStore(server, 'a{b}'), /RedisMetadataStore: runId must not contain braces/, 'braces');
        await assertRejects(() => openStore(server, ''), /RedisMetadataStore: runId must be a non-empty string/, 'empty');
        await assertRejects(() => openStore(server, 'a b'), /RedisMetadataStore: runId must be visible ASCII/, 'space');
      } finally {
        await server.stop();
      }
    },
    { only },
  );
});
