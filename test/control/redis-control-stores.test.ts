/**
 * The Redis queue, prompt ledger and member registry against a real redis-server: the RefQueue and
 * PromptLedger conformance contracts, then what only a shared server can show: two processes (two
 * links on one run) never lease one ref twice, a lease of a process that vanished expires on the
 * server clock and is re-leased by another, members are shared, runs are isolated, damaged records
 * are refused by id, and openRedisControlStores wires a full ControlStores. Node-only (it runs
 * redis-server); Node-only modules load at run time, so the browser bundle and Deno never import them.
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { RedisRefQueue } from '../../src/control/redis/redis-ref-queue.ts';
import { RedisPromptLedger } from '../../src/control/redis/redis-prompt-ledger.ts';
import { RedisMemberRegistry } from '../../src/control/redis/redis-members.ts';
import { openRedisControlStores } from '../../src/control/redis/redis-control-stores.ts';
import { controlKeys } from '../../src/control/redis/redis-keys.ts';
import type { RedisLink } from '../../src/ports/redis-link.ts';
import type { SampleRef } from '../../src/contracts/records.ts';
import { promptTask, sampleRef } from '../contracts/fixtures.ts';
import { refQueueConformance } from './ref-queue-conformance.ts';
import { promptLedgerConformance } from './prompt-ledger-conformance.ts';

type RedisFixture = typeof import('../dataplane/redis-fixture.ts');
type RedisServer = Awaited<ReturnType<RedisFixture['startRedisServer']>>;
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');

/** Resolved relative to this file, at run time, so bundlers never follow it into node:child_process. */
function nodeOnlyImport<T>(specifier: string): Promise<T> {
  return import(/* @vite-ignore */ specifier) as Promise<T>;
}

const only = ['node'] as const;
let runs = 0;
/** A run id no other check has used, so checks never see each other's keys. */
const freshRun = (): string => `run-${Date.now().toString(36)}-${runs++}`;

/** One private server per check, and the links opened on it; `stop` closes them all, then the server. */
async function serverWithLinks(
  options: { durable?: boolean } = {},
): Promise<{ server: RedisServer; link: () => Promise<RedisLink>; stop: () => Promise<void> }> {
  const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
  const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
  const server = await startRedisServer(options);
  const links: RedisLink[] = [];
  return {
    server,
    link: async () => {
      const link = await connectRedis(server.url);
      links.push(link);
      return link;
    },
    stop: async () => {
      for (const link of links) await link.close();
      await server.stop();
    },
  };
}

/** A check over a fresh server and run id; the server is stopped however the check ends. */
function withServer(
  body: (s: Awaited<ReturnType<typeof serverWithLinks>>, runId: string) => Promise<void>,
  options: { durable?: boolean } = {},
): () => Promise<void> {
  return async () => {
    const s = await serverWithLinks(options);
    try {
      await body(s, freshRun());
    } finally {
      await s.stop();
    }
  };
}

/** Writes one hash field straight into Redis, as a bug or an operator might. */
async function corrupt(link: RedisLink, key: string, field: string, value: string): Promise<void> {
  await link.evalScript(`redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1`, [key], [field, value]);
}

export default defineSuite('control/redis-control-stores', (t) => {
  refQueueConformance(
    t,
    'redis queue',
    async () => {
      const s = await serverWithLinks();
      const link = await s.link();
      const runId = freshRun();
      return { open: (options = {}) => new RedisRefQueue(link, runId, { ...options, pollMs: 2 }), cleanup: s.stop };
    },
    { only },
  );

  promptLedgerConformance(
    t,
    'redis ledger',
    async () => {
      const s = await serverWithLinks();
      const link = await s.link();
      const runId = freshRun();
      return { open: (options) => new RedisPromptLedger(link, runId, options), cleanup: s.stop };
    },
    { only },
  );

  t.test(
    'two queues on two links: competing gets never lease one id twice',
    withServer(async (s, runId) => {
      const [q1, q2] = [new RedisRefQueue(await s.link(), runId), new RedisRefQueue(await s.link(), runId)];
      const refs = Array.from({ length: 100 }, (_, i) => sampleRef(`r${i}`));
      await q1.put(refs.slice(0, 50));
      let total = 0;
      const deadline = performance.now() + 5_000;
      const drain = async (q: RedisRefQueue): Promise<string[]> => {
        const got: string[] = [];
        while (total < refs.length && performance.now() < deadline) {
          const batch = await q.get(3, 20);
          total += batch.length;
          got.push(...batch.map((r) => r.sampleId));
        }
        return got;
      };
      // The second half arrives through the other link while both consumers are leasing.
      const [a, b] = await Promise.all([drain(q1), drain(q2), q2.put(refs.slice(50))]);
      const union = new Set([...a, ...b]);
      assertEqual(union.size, 100, `union is every ref (consumer 1 got ${a.length}, consumer 2 got ${b.length})`);
      assertEqual(a.filter((id) => b.includes(id)).length, 0, 'intersection is empty');
      assertEqual(a.length + b.length, 100, 'no consumer leased an id twice');
      assertEqual(await q1.inFlight(), 100, 'both see all 100 in flight');
    }),
    { only },
  );

  t.test(
    'a lease of a process that disappeared expires on the server clock and is re-leased by another',
    withServer(async (s, runId) => {
      const dying = await s.link();
      const ref = sampleRef('orphan');
      const q1 = new RedisRefQueue(dying, runId, { leaseTimeoutMs: 150, maxAttempts: 3 });
      await q1.put([ref]);
      assertDeepEqual(await q1.get(1), [ref], 'leased by the first process');
      const leasedAt = performance.now();
      await dying.close(); // the process is gone: no ack, no fail
      const q2 = new RedisRefQueue(await s.link(), runId, { leaseTimeoutMs: 150, maxAttempts: 3, pollMs: 5 });
      assertDeepEqual(await q2.get(1), [], 'not before the lease expires');
      assertDeepEqual(await q2.get(1, 3_000), [ref], 're-leased by the second process');
      const waited = performance.now() - leasedAt;
      assert(waited >= 140 && waited < 2_000, `re-leased ${waited.toFixed(0)} ms after the first lease (timeout 150 ms)`);
      assertEqual(await q2.inFlight(), 1, "one lease, now the second process's");
      assertEqual(await q2.ack([ref]), 1, 'the second process acks it');
    }),
    { only },
  );

  t.test(
    'two ledgers on two links never hand one task to two workers',
    withServer(async (s, runId) => {
      const options = { leaseTimeoutMs: null, maxAttempts: null, maxLeasePerWorker: null };
      const [l1, l2] = [new RedisPromptLedger(await s.link(), runId, options), new RedisPromptLedger(await s.link(), runId, options)];
      await l1.add(Array.from({ length: 40 }, (_, i) => promptTask(`t${i}`)));
      const got = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? l1 : l2).lease(`w${i}`, 3)));
      const ids = got.flat().map((task) => task.taskId);
      assertEqual(new Set(ids).size, ids.length, 'no task leased twice');
      assertEqual(ids.length, 30, 'thirty leased');
      assertEqual((await l1.counts()).leased, 30, 'the other link sees the same leases');
      const taken = got[0][0].taskId; // leased by w0 through l2
      assertDeepEqual((await l1.fail('w1', [taken], 'x', true)).skipped, [taken], 'ownership holds across links');
      assertDeepEqual((await l1.fail('w0', [taken], 'x', true)).requeued, [taken], 'the owner may fail it through either link');
    }),
    { only },
  );

  t.test(
    'members registered on one link are counted on another; runs are isolated',
    withServer(async (s, runId) => {
      const m1 = new RedisMemberRegistry(await s.link(), runId);
      const m2 = new RedisMemberRegistry(await s.link(), runId);
      await m1.register('rollout', 'rollout-a', { host: 'h1' });
      await m1.register('rollout', 'rollout-a', { host: 'h2' }); // re-registering overwrites, not adds
      await m1.register('trainer', 'trainer-0', {});
      assertEqual(await m2.count('rollout'), 1, 'rollout workers seen on the other link');
      assertEqual(await m2.has('trainer', 'trainer-0'), true, 'trainer seen on the other link');
      assertEqual(await m2.has('trainer', 'rollout-a'), false, 'kinds are separate');
      const other = new RedisMemberRegistry(await s.link(), `${runId}-other`);
      assertEqual(await other.count('rollout'), 0, 'another run sees no members');
      const q = new RedisRefQueue(await s.link(), runId);
      await q.put([sampleRef('x')]);
      assertEqual(await new RedisRefQueue(await s.link(), `${runId}-other`).depth(), 0, 'another run sees no refs');
      await assertRejects(
        () => m1.register('rollout', 'w', { x: new Float32Array(1) }),
        /info\.x is a tensor-like value/,
        'a tensor in member info',
      );
      await assertRejects(() => m1.register('admin' as 'rollout', 'w', {}), /kind must be "rollout" or "trainer"/, 'unknown kind');
    }),
    { only },
  );

  t.test(
    'damaged records are refused with an error naming the id',
    withServer(async (s, runId) => {
      const link = await s.link();
      const keys = controlKeys(runId);
      const ledger = new RedisPromptLedger(link, runId, { leaseTimeoutMs: null, maxAttempts: null, maxLeasePerWorker: null });
      await ledger.add([promptTask('t0'), promptTask('t1')]);
      await corrupt(link, keys.promptTasks, 't0', '{"taskId":"t0","maxLength":"long"}');
      await assertRejects(() => ledger.task('t0'), /task "t0" in prompt:tasks is invalid/, 'schema-damaged task');
      await corrupt(link, keys.promptTasks, 't1', '{not json');
      await assertRejects(() => ledger.task('t1'), /task "t1" in prompt:tasks is damaged \(not JSON/, 'non-JSON task');
      const queue = new RedisRefQueue(link, runId);
      const ref: SampleRef = sampleRef('a');
      await queue.put([ref]);
      await corrupt(link, keys.queueRefs, ref.sampleId, JSON.stringify({ ...ref, numTokens: -1 }));
      await assertRejects(() => queue.get(1), new RegExp(`ref "${ref.sampleId}" in queue:refs is invalid`), 'damaged ref');
      await corrupt(link, keys.queueLease, ref.sampleId, 'garbage');
      await assertRejects(
        () => queue.ack([ref]),
        /lease entry of "run-test:a" .* is "garbage"/,
        'damaged lease entry, refused before any write',
      );
      assertEqual(await queue.inFlight(), 1, 'the refused ack released nothing');
    }),
    { only },
  );

  t.test(
    'openRedisControlStores: a full ControlStores that refuses a non-durable server unless told',
    withServer(async (s, runId) => {
      const link = await s.link();
      await assertRejects(() => openRedisControlStores(link, runId), /is not durable/, 'durability required by default');
      await assertRejects(
        () => openRedisControlStores(link, runId, { requireDurable: false, queue: { maxAttempts: 0 } }),
        /maxAttempts must be a positive number/,
        'bad option',
      );
      const stores = await openRedisControlStores(link, runId, {
        requireDurable: false,
        queue: { leaseTimeoutMs: 1_000 },
        prompts: { maxAttempts: 2 },
      });
      const ref = sampleRef('t0');
      assertEqual(await stores.metadata.commitSample(ref), true, 'metadata store works');
      await stores.queue.put([ref]);
      await stores.prompts.add([promptTask('t0')]);
      await stores.members.register('rollout', 'rollout-a', {});
      const again = await openRedisControlStores(await s.link(), runId, { requireDurable: false });
      assertDeepEqual(
        [
          await again.metadata.committedCount(),
          await again.queue.depth(),
          (await again.prompts.counts()).pending,
          await again.members.count('rollout'),
        ],
        [1, 1, 1, 1],
        'a second process sees all four',
      );
      await stores.metadata.close();
      await again.metadata.close();
    }),
    { only },
  );

  t.test(
    'openRedisControlStores accepts a durable server by default',
    withServer(
      async (s, runId) => {
        const stores = await openRedisControlStores(await s.link(), runId, { url: s.server.url });
        await stores.queue.put([sampleRef('d0')]);
        assertEqual(await stores.queue.depth(), 1, 'queue on a durable server');
        await stores.metadata.close();
      },
      { durable: true },
    ),
    { only },
  );
});
