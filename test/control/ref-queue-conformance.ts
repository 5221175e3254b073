/**
 * One behavioural contract for every RefQueue (src/control/control-stores.ts): the in-memory
 * SampleRefQueue and the Redis queue must agree on FIFO order, idempotent put, lease expiry,
 * bounded deliveries, partitions, waiting get and terminal failures with their reasons (ported
 * from test/control/sample-ref-queue.test.ts, written against the async interface).
 *
 * `env` sets up an empty store and returns `open`, which builds a queue over it with the given
 * options (an injected clock lets expiry checks run without sleeping), and a cleanup.
 */
import type { SuiteBuilder, TestContext } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import type { RefQueue } from '../../src/control/control-stores.ts';
import type { SampleRef } from '../../src/contracts/records.ts';
import type { RuntimeName } from '../../src/ports/runtime.ts';
import { sampleRef } from '../contracts/fixtures.ts';

export interface RefQueueOpenOptions {
  leaseTimeoutMs?: number | null;
  maxAttempts?: number | null;
  /** Milliseconds; when given it is the only clock lease ages are measured on. */
  clock?: () => number;
}

export interface RefQueueEnv {
  /** A queue over this environment's store (empty when the check starts). Option errors may throw or reject. */
  open(options?: RefQueueOpenOptions): RefQueue | Promise<RefQueue>;
  cleanup(): Promise<void>;
}

export type RefQueueEnvFactory = (ctx: TestContext) => Promise<RefQueueEnv>;

const ids = (refs: readonly SampleRef[]): string[] => refs.map((r) => r.sampleId.split(':')[1]);
const [a, b, c] = ['a', 'b', 'c'].map((t) => sampleRef(t));

export function refQueueConformance(
  t: SuiteBuilder,
  label: string,
  env: RefQueueEnvFactory,
  options: { only?: readonly RuntimeName[] } = {},
): void {
  const check = (name: string, body: (e: RefQueueEnv) => Promise<void>): void => {
    t.test(
      `${label}: ${name}`,
      async (ctx) => {
        const e = await env(ctx);
        try {
          await body(e);
        } finally {
          await e.cleanup();
        }
      },
      { only: options.only },
    );
  };
  const withQueue = (name: string, body: (q: RefQueue) => Promise<void>, open: RefQueueOpenOptions = {}): void =>
    check(name, async (e) => body(await e.open(open)));

  withQueue('put/get/ack keep FIFO order and counts', async (q) => {
    await q.put([a, b, c]);
    const got = await q.get(2);
    assertDeepEqual(ids(got), ['a', 'b'], 'first two in FIFO order');
    assertEqual(await q.depth(), 1, 'depth after get 2 of 3');
    assertEqual(await q.inFlight(), 2, 'in flight after get 2 of 3');
    assertEqual(await q.isLeased(a.sampleId), true, 'a is leased');
    assertEqual(await q.isLeased(c.sampleId), false, 'c is pending, not leased');
    assertEqual(await q.ack(got), 2, 'acked');
    assertEqual(await q.inFlight(), 0, 'in flight after ack');
    assertEqual(await q.isLeased(a.sampleId), false, 'a released');
    assertEqual(await q.ack([sampleRef('unknown')]), 0, 'ack of unknown is a no-op');
    assertEqual(await q.ack([c]), 0, 'ack of a pending ref is a no-op');
    assertEqual(await q.depth(), 1, 'c still pending');
    assertDeepEqual(await q.get(5), [c], 'the ref read back equals the ref put');
  });

  withQueue('put is idempotent on ids pending or leased', async (q) => {
    assertEqual((await q.put([a, a, b])).length, 2, 'duplicate within one put skipped');
    await q.get(1);
    assertDeepEqual(await q.put([a, b]), [], 'leased a and pending b both skipped');
    assertEqual((await q.depth()) + (await q.inFlight()), 2, 'still two refs in total');
  });

  withQueue('retryable fail requeues at the tail; terminal fail is recorded and dropped', async (q) => {
    await q.put([a, b, c]);
    const [first] = await q.get(1);
    assertDeepEqual(await q.fail([first], 'loader hiccup', true), { requeued: [first.sampleId], terminal: [] }, 'retryable outcome');
    assertDeepEqual(ids(await q.get(3)), ['b', 'c', 'a'], 'a moved to the tail');
    const outcome = await q.fail([b], 'feature evicted', false);
    assertDeepEqual(outcome.terminal, [b.sampleId], 'terminal outcome');
    assertDeepEqual(await q.terminalFailures(), [{ sampleId: b.sampleId, reason: 'feature evicted', attempts: 1 }], 'terminal record');
    assertEqual(await q.depth(), 0, 'terminal ref not requeued');
    assertDeepEqual(await q.fail([b], 'again', true), { requeued: [], terminal: [] }, 'failing a ref no longer leased is ignored');
    assertDeepEqual(await q.fail([c, c], 'twice', true), { requeued: [c.sampleId], terminal: [] }, 'a repeat within one fail counts once');
  });

  withQueue('a terminally failed ref may be put again; its terminal record goes', async (q) => {
    await q.put([a, b]);
    await q.get(2);
    await q.fail([a], 'first', false);
    await q.fail([b], 'second', false);
    assertDeepEqual(
      (await q.terminalFailures()).map((f) => f.reason),
      ['first', 'second'],
      'in the order they happened',
    );
    assertDeepEqual(await q.put([a]), [a.sampleId], 'put again');
    assertDeepEqual(
      (await q.terminalFailures()).map((f) => f.sampleId),
      [b.sampleId],
      'only b is still terminal',
    );
  });

  withQueue(
    'ack ends a ref for good: put again, it starts over with fresh deliveries',
    async (q) => {
      await q.put([a]);
      await q.ack(await q.get(1));
      assertDeepEqual(await q.put([a]), [a.sampleId], 'an acked id is neither pending nor leased');
      await q.get(1);
      assertDeepEqual(
        await q.fail([a], 'x', true),
        { requeued: [], terminal: [a.sampleId] },
        'maxAttempts 1: the first delivery is the last',
      );
      assertEqual((await q.terminalFailures())[0].attempts, 1, 'one delivery counted since the ack');
    },
    { maxAttempts: 1 },
  );

  withQueue('empty get returns immediately without a timeout; maxRefs 0 leases nothing', async (q) => {
    const start = performance.now();
    assertDeepEqual(await q.get(4), [], 'empty');
    assert(performance.now() - start < 50, 'returned immediately');
    await q.put([a]);
    const t0 = performance.now();
    assertDeepEqual(await q.get(0, 1_000), [], 'maxRefs 0');
    assert(performance.now() - t0 < 50, 'maxRefs 0 does not wait');
    assertEqual(await q.depth(), 1, 'a still pending');
  });

  withQueue('get with a timeout waits for a put, and gives up at the deadline', async (q) => {
    const waiting = q.get(4, 2_000);
    setTimeout(() => void q.put([a]), 20);
    const start = performance.now();
    assertDeepEqual(ids(await waiting), ['a'], 'woken by put');
    assert(performance.now() - start < 1_000, 'did not wait for the full timeout');
    const t0 = performance.now();
    assertDeepEqual(await q.get(4, 60), [], 'nothing arrived');
    assert(performance.now() - t0 >= 55, `waited for the timeout (${(performance.now() - t0).toFixed(0)} ms)`);
  });

  let now = 0;
  check('expired leases return to the tail; attempts are bounded', async (e) => {
    now = 0;
    const q = await e.open({ leaseTimeoutMs: 100, maxAttempts: 2, clock: () => now });
    await q.put([a, b]);
    await q.get(1);
    now = 50;
    assertDeepEqual(ids(await q.get(1)), ['b'], 'a not yet expired');
    now = 150;
    assertDeepEqual(ids(await q.get(1)), ['a'], 'a expired and leased again (b expired after it)');
    assertDeepEqual(ids(await q.get(1)), ['b'], 'b expired too and is back');
    now = 400;
    assertDeepEqual(await q.get(5), [], 'second expiry of each exhausts maxAttempts=2');
    assertDeepEqual(
      (await q.terminalFailures()).map((f) => f.reason),
      ['lease expired after 100 ms (attempts exhausted: 2)', 'lease expired after 100 ms (attempts exhausted: 2)'],
      'terminal reasons',
    );
    assertDeepEqual(
      (await q.terminalFailures()).map((f) => f.sampleId),
      [a.sampleId, b.sampleId],
      'in lease order',
    );
    assertEqual(await q.inFlight(), 0, 'nothing leased');
  });

  check('a lease expires at exactly leaseTimeoutMs; an expired ref goes back to its own partition', async (e) => {
    now = 1_000;
    const q = await e.open({ leaseTimeoutMs: 100, clock: () => now });
    await q.put([a], { partitionKey: 'rank1' });
    await q.get(1, undefined, { partitionKey: 'rank1' });
    now = 1_099;
    assertDeepEqual(await q.get(1, undefined, { partitionKey: 'rank1' }), [], '99 ms: still leased');
    now = 1_100;
    assertEqual(await q.inFlight('rank1'), 1, 'expiry is lazy: nothing changes until a get');
    assertDeepEqual(await q.get(1), [], 'a get on the default partition reclaims, but finds nothing of its own');
    assertEqual(await q.depth('rank1'), 1, 'a is pending in rank1 again');
    assertEqual(await q.inFlight('rank1'), 0, 'and no longer in flight');
    assertDeepEqual(ids(await q.get(1, undefined, { partitionKey: 'rank1' })), ['a'], 're-leased from rank1');
  });

  withQueue('partition keys keep separate FIFOs', async (q) => {
    await q.put([a], { partitionKey: 'rank0' });
    await q.put([b], { partitionKey: 'rank1' });
    await q.put([c]);
    assertEqual(await q.depth('rank0'), 1, 'rank0 depth');
    assertEqual(await q.depth(), 3, 'total depth');
    assertDeepEqual(ids(await q.get(5, undefined, { partitionKey: 'rank1' })), ['b'], 'rank1 sees only its ref');
    assertDeepEqual(ids(await q.get(5)), ['c'], 'default partition sees only unkeyed refs');
    assertEqual(await q.inFlight('rank1'), 1, 'rank1 in flight');
    assertEqual(await q.inFlight(), 2, 'in flight over all partitions');
    assertDeepEqual(await q.put([a], { partitionKey: 'rank1' }), [], 'an id pending in another partition is not duplicated');
    await q.fail([b], 'retry', true);
    assertEqual(await q.depth('rank1'), 1, 'retryable fail returns to the same partition');
  });

  withQueue('partition names are opaque strings; the empty string is the default partition', async (q) => {
    const names = ['a:b', '{x}', 'ü / 空', 'queue:refs', ' '];
    const refs = names.map((_, i) => sampleRef(`p${i}`));
    for (const [i, name] of names.entries()) await q.put([refs[i]], { partitionKey: name });
    await q.put([a], { partitionKey: '' });
    for (const [i, name] of names.entries()) {
      assertEqual(await q.depth(name), 1, `depth of ${JSON.stringify(name)}`);
      assertDeepEqual(await q.get(5, undefined, { partitionKey: name }), [refs[i]], `get from ${JSON.stringify(name)}`);
    }
    assertDeepEqual(ids(await q.get(5)), ['a'], "a get without a key sees the '' partition");
    assertEqual(await q.depth(), 0, 'all leased');
  });

  withQueue('concurrent gets never lease one ref twice', async (q) => {
    const refs = Array.from({ length: 30 }, (_, i) => sampleRef(`c${i}`));
    await q.put(refs);
    const got = (await Promise.all(Array.from({ length: 8 }, () => q.get(4)))).flat();
    assertEqual(got.length, 30, 'every ref leased');
    assertEqual(new Set(got.map((r) => r.sampleId)).size, 30, 'no ref leased twice');
  });

  withQueue('clear drops pending and leased refs, keeps terminal failures; the refs can be put again', async (q) => {
    await q.put([a, b, c]);
    await q.put([sampleRef('p')], { partitionKey: 'dp1' });
    const [first, second] = await q.get(2);
    await q.fail([first], 'poisoned', false);
    await q.clear();
    assertEqual(await q.depth(), 0, 'nothing pending, in any partition');
    assertEqual(await q.inFlight(), 0, 'nothing leased');
    assertEqual(await q.isLeased(second.sampleId), false, 'the lease is gone');
    assertDeepEqual(
      (await q.terminalFailures()).map((f) => f.sampleId),
      [first.sampleId],
      'terminal failures kept',
    );
    assertDeepEqual(await q.put([second, c]), [second.sampleId, c.sampleId], 'a cleared ref can be put again');
    assertDeepEqual(ids(await q.get(5)), ['b', 'c'], 'FIFO after clear');
  });

  check('invalid arguments are rejected', async (e) => {
    await assertRejects(() => e.open({ leaseTimeoutMs: 0 }), /leaseTimeoutMs must be a positive number/, 'zero timeout');
    await assertRejects(() => e.open({ maxAttempts: 1.5 }), /maxAttempts must be an integer/, 'fractional attempts');
    const q = await e.open();
    await assertRejects(() => q.get(-1), /maxRefs must be a non-negative integer/, 'negative maxRefs');
    await assertRejects(() => q.get(1, -5), /timeoutMs must be ≥ 0/, 'negative timeout');
    const smuggled = { ...a, metadata: { x: new Float64Array(1) } } as unknown as SampleRef;
    await assertRejects(() => q.put([smuggled]), /put refs\[0\]\.metadata\.x is a tensor-like value/, 'tensor in a put');
    await assertRejects(() => q.fail([a], 42 as unknown as string, true), /reason must be a string/, 'non-string reason');
    assertEqual(await q.depth(), 0, 'nothing enqueued');
  });
}
