/**
 * waitForRoundCommits over the in-memory control plane: it returns once every sample of the round
 * is committed, reports progress, and fails closed naming the cause when a prompt of the round
 * failed terminally or when nothing was committed for stallMs.
 */
import { defineSuite } from '../../harness/suite.ts';
import { assertDeepEqual, assertRejects } from '../../harness/assert.ts';
import { DataFlowController } from '../../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import { waitForRoundCommits } from '../../../src/training/session/cluster-round.ts';
import { sampleRef } from '../../contracts/fixtures.ts';

async function setup() {
  const store = new InMemoryMetadataStore();
  const controller = new DataFlowController({ runId: 'run', store });
  const worker = await controller.registerRolloutWorker({ workerId: 'w' });
  await controller.ingestPrompts(['t0', 't1'].map((taskId) => ({ taskId, payload: {} })));
  const ids = ['t0', 't1'].map((task) => sampleRef(task, { runId: 'run' }).sampleId);
  return { store, controller, worker, ids };
}

export default defineSuite('training/session/cluster-round', (t) => {
  t.test('returns once the whole round is committed, reporting progress', async () => {
    const { store, controller, worker, ids } = await setup();
    const progress: string[] = [];
    setTimeout(() => void controller.commitSamples(worker, [sampleRef('t1', { runId: 'run' })]), 10);
    setTimeout(() => void controller.commitSamples(worker, [sampleRef('t0', { runId: 'run' })]), 40);
    await waitForRoundCommits(0, ids, ['t0', 't1'], controller, store, {
      pollMs: 2,
      stallMs: 5_000,
      now: () => performance.now(),
      onProgress: (d, n) => progress.push(`${d}/${n}`),
    });
    assertDeepEqual(progress.at(-1), '2/2', 'progress reached the whole round');
  });

  t.test('a terminally failed prompt of the round fails the wait naming it', async () => {
    const { store, controller, worker, ids } = await setup();
    const [task] = await controller.leasePromptTasks(worker, 1);
    await controller.failPromptTasks(worker, [task.taskId], 'capture mismatch', false);
    await assertRejects(
      () => waitForRoundCommits(3, ids, ['t0', 't1'], controller, store, { pollMs: 2, stallMs: 5_000, now: () => performance.now() }),
      /round 3: 1 prompt\(s\) failed in rollout .*t0: capture mismatch/,
      'failed prompt',
    );
  });

  t.test('no commit for stallMs fails the wait, naming the registered rollout workers', async () => {
    const { store, controller, ids } = await setup();
    await assertRejects(
      () => waitForRoundCommits(1, ids, ['t0', 't1'], controller, store, { pollMs: 2, stallMs: 30, now: () => performance.now() }),
      /round 1: 2 of 2 samples not committed .*\(1 rollout workers registered, 0 prompts leased\); is a `speclab rollout` of this run running\?/,
      'stall',
    );
  });
});
