/**
 * StreamOrderLease over the in-memory control plane: refs committed out of order come out in the
 * stream's order, held refs stay leased until acked, and a ref outside the stream is failed
 * terminally and refused by name.
 */
import { defineSuite } from '../../harness/suite.ts';
import { assertDeepEqual, assertEqual, assertRejects } from '../../harness/assert.ts';
import { DataFlowController } from '../../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import { StreamOrderLease } from '../../../src/training/session/stream-order-lease.ts';
import { sampleRef } from '../../contracts/fixtures.ts';

async function setup(stream: readonly string[]) {
  const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
  const worker = await controller.registerRolloutWorker({ workerId: 'w' });
  const rank = new Map(stream.map((task, i) => [sampleRef(task, { runId: 'run' }).sampleId, i]));
  const lease = new StreamOrderLease(await controller.trainLease(), controller.queue, rank);
  const commit = (...tasks: string[]) =>
    controller.commitSamples(
      worker,
      tasks.map((task) => sampleRef(task, { runId: 'run' })),
    );
  return { controller, lease, commit };
}

const tasksOf = (refs: readonly { sampleId: string }[]) => refs.map((r) => r.sampleId.split(':')[1]);

export default defineSuite('training/session/stream-order-lease', (t) => {
  t.test('hands a round out in stream order whatever the commit order; held refs stay leased until acked', async () => {
    const { controller, lease, commit } = await setup(['r0-0', 'r0-1', 'r0-2', 'r0-3']);
    await commit('r0-2', 'r0-0');
    await commit('r0-3', 'r0-1');
    assertDeepEqual(tasksOf(await lease.get(2)), ['r0-0', 'r0-1'], 'first batch in stream order');
    assertEqual(lease.held, 2, 'the rest of the round is held');
    assertEqual(await controller.queue.inFlight(), 4, 'all four leased in the queue');
    const second = await lease.get(2);
    assertDeepEqual(tasksOf(second), ['r0-2', 'r0-3'], 'second batch');
    await lease.ack(second, { globalStep: 2, optimizerDurable: true });
    assertEqual(await controller.queue.inFlight(), 2, 'acked refs released, the others still leased');
    assertDeepEqual(await lease.get(2), [], 'nothing queued: empty');
  });

  t.test('a queued ref outside the stream is failed terminally and refused by name', async () => {
    const { controller, lease, commit } = await setup(['r0-0']);
    await commit('r0-0', 'stray');
    await assertRejects(() => lease.get(2), /1 queued sample\(s\) are not in this run's stream \(run:stray\)/, 'refused');
    const failures = await controller.queue.terminalFailures();
    assertDeepEqual(
      failures.map((f) => f.sampleId),
      ['run:stray'],
      'the stray ref is a terminal failure, never trained',
    );
  });
});
