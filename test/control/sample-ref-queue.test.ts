/** docs/control-plane.md §4 (as SpecForge's test_sample_ref_queue) plus lease expiry, bounded attempts, partitions and waiting get. */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows, assertRejects } from '../harness/assert.ts';
import { SampleRefQueue } from '../../src/control/sample-ref-queue.ts';
import type { SampleRef } from '../../src/contracts/records.ts';
import { sampleRef } from '../contracts/fixtures.ts';

const ids = (refs: readonly SampleRef[]): string[] => refs.map((r) => r.sampleId.split(':')[1]);
const [a, b, c] = ['a', 'b', 'c'].map((t) => sampleRef(t));

export default defineSuite('control/sample-ref-queue', (t) => {
  t.test('put/get/ack keep FIFO order and counts', async () => {
    const q = new SampleRefQueue();
    await q.put([a, b, c]);
    const got = await q.get(2);
    assertDeepEqual(ids(got), ['a', 'b'], 'first two in FIFO order');
    assertEqual(await q.depth(), 1, 'depth after get 2 of 3');
    assertEqual(await q.inFlight(), 2, 'in flight after get 2 of 3');
    assertEqual(await q.ack(got), 2, 'acked');
    assertEqual(await q.inFlight(), 0, 'in flight after ack');
    assertEqual(await q.ack([sampleRef('unknown')]), 0, 'ack of unknown is a no-op');
  });

  t.test('put is idempotent on ids pending or leased', async () => {
    const q = new SampleRefQueue();
    assertDeepEqual((await q.put([a, a, b])).length, 2, 'duplicate within one put skipped');
    await q.get(1);
    assertDeepEqual(await q.put([a, b]), [], 'leased a and pending b both skipped');
    assertEqual(await q.depth() + await q.inFlight(), 2, 'still two refs in total');
  });

  t.test('retryable fail requeues at the tail; terminal fail is recorded and dropped', async () => {
    const q = new SampleRefQueue();
    await q.put([a, b, c]);
    const [first] = await q.get(1);
    assertDeepEqual(await q.fail([first], 'loader hiccup', true), { requeued: [first.sampleId], terminal: [] }, 'retryable outcome');
    assertDeepEqual(ids(await q.get(3)), ['b', 'c', 'a'], 'a moved to the tail');
    const outcome = await q.fail([b], 'feature evicted', false);
    assertDeepEqual(outcome.terminal, [b.sampleId], 'terminal outcome');
    assertDeepEqual(await q.terminalFailures(), [{ sampleId: b.sampleId, reason: 'feature evicted', attempts: 1 }], 'terminal record');
    assertEqual(await q.depth(), 0, 'terminal ref not requeued');
    assertDeepEqual(await q.fail([b], 'again', true), { requeued: [], terminal: [] }, 'failing a ref no longer leased is ignored');
  });

  t.test('empty get returns immediately without a timeout', async () => {
    const q = new SampleRefQueue();
    const start = performance.now();
    assertDeepEqual(await q.get(4), [], 'empty');
    assert(performance.now() - start < 50, 'returned immediately');
  });

  t.test('get with a timeout waits for a put, and gives up at the deadline', async () => {
    const q = new SampleRefQueue();
    const waiting = q.get(4, 2_000);
    setTimeout(() => void q.put([a]), 20);
    const start = performance.now();
    assertDeepEqual(ids(await waiting), ['a'], 'woken by put');
    assert(performance.now() - start < 1_000, 'did not wait for the full timeout');
    const t0 = performance.now();
    assertDeepEqual(await q.get(4, 60), [], 'nothing arrived');
    assert(performance.now() - t0 >= 55, `waited for the timeout (${(performance.now() - t0).toFixed(0)} ms)`);
  });

  t.test('expired leases return to the tail; attempts are bounded', async () => {
    let now = 0;
    const q = new SampleRefQueue({ leaseTimeoutMs: 100, maxAttempts: 2, clock: () => now });
    await q.put([a, b]);
    await q.get(1);
    now = 50;
    assertDeepEqual(ids(await q.get(1)), ['b'], 'a not yet expired');
    now = 150;
    assertDeepEqual(ids(await q.get(1)), ['a'], 'a expired and leased again (b expired after it)');
    assertDeepEqual(ids(await q.get(1)), ['b'], 'b expired too and is back');
    now = 400;
    assertDeepEqual(await q.get(5), [], 'second expiry of each exhausts maxAttempts=2');
    assertDeepEqual((await q.terminalFailures()).map((f) => f.reason), ['lease expired after 100 ms (attempts exhausted: 2)', 'lease expired after 100 ms (attempts exhausted: 2)'], 'terminal reasons');
    assertEqual(await q.inFlight(), 0, 'nothing leased');
  });

  t.test('partition keys keep separate FIFOs', async () => {
    const q = new SampleRefQueue();
    await q.put([a], { partitionKey: 'rank0' });
    await q.put([b], { partitionKey: 'rank1' });
    await q.put([c]);
    assertEqual(await q.depth('rank0'), 1, 'rank0 depth');
    assertEqual(await q.depth(), 3, 'total depth');
    assertDeepEqual(ids(await q.get(5, undefined, { partitionKey: 'rank1' })), ['b'], 'rank1 sees only its ref');
    assertDeepEqual(ids(await q.get(5)), ['c'], 'default partition sees only unkeyed refs');
    assertEqual(await q.inFlight('rank1'), 1, 'rank1 in flight');
    assertDeepEqual(await q.put([a], { partitionKey: 'rank1' }), [], 'an id pending in another partition is not duplicated');
    await q.fail([b], 'retry', true);
    assertEqual(await q.depth('rank1'), 1, 'retryable fail returns to the same partition');
  });

  t.test('invalid arguments are rejected', async () => {
    assertThrows(() => new SampleRefQueue({ leaseTimeoutMs: 0 }), /leaseTimeoutMs must be a positive number/, 'zero timeout');
    assertThrows(() => new SampleRefQueue({ maxAttempts: 1.5 }), /maxAttempts must be an integer/, 'fractional attempts');
    const q = new SampleRefQueue();
    await assertRejects(() => q.get(-1), /maxRefs must be a non-negative integer/, 'negative maxRefs');
    await assertRejects(() => q.put([{ ...a, metadata: { x: new Float64Array(1) } } as unknown as SampleRef]), /SampleRefQueue\.put refs\[0\]\.metadata\.x is a tensor-like value/, 'tensor in a put');
  });
});
