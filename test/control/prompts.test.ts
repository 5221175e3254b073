/** Prompt-task lifecycle (docs/control-plane.md §3) with the HEAD fixes: expiry, bounded attempts, completion, lease cap. */
import { defineSuite } from '../harness/suite.ts';
import { assertDeepEqual, assertEqual } from '../harness/assert.ts';
import { sampleRef } from '../contracts/fixtures.ts';
import { ingest, rig } from './controller-fixtures.ts';

export default defineSuite('control/prompts', (t) => {
  t.test('failing a task leased by another worker is ignored (ownership check)', async () => {
    const { controller, worker } = await rig();
    const other = await controller.registerRolloutWorker({ workerId: 'rollout-b' });
    await ingest(controller, 't0');
    await controller.leasePromptTasks(worker, 1);
    assertDeepEqual(
      await controller.failPromptTasks(other, ['t0', 'nope'], 'not mine', false),
      { requeued: [], failed: [], skipped: ['t0', 'nope'] },
      'skipped',
    );
    assertEqual((await controller.promptFailures()).length, 0, 'no failure recorded');
    assertDeepEqual((await controller.failPromptTasks(worker, ['t0'], 'oom', true)).requeued, ['t0'], 'owner may fail it');
  });

  t.test('retries are bounded by maxPromptAttempts', async () => {
    const { controller, worker } = await rig({ maxPromptAttempts: 2 });
    await ingest(controller, 't0');
    await controller.leasePromptTasks(worker, 1);
    assertDeepEqual((await controller.failPromptTasks(worker, ['t0'], 'engine crash', true)).requeued, ['t0'], 'first failure retried');
    const [again] = await controller.leasePromptTasks(worker, 1);
    assertEqual(again.attempt, 1, 'attempt incremented');
    assertDeepEqual((await controller.failPromptTasks(worker, ['t0'], 'engine crash', true)).failed, ['t0'], 'second failure terminal');
    assertDeepEqual(
      await controller.promptFailures(),
      [{ taskId: 't0', reason: 'engine crash (attempts exhausted: 2)', attempt: 1 }],
      'terminal record',
    );
    assertEqual(await controller.promptTask('t0'), undefined, 'terminal task record dropped');
  });

  t.test('an expired prompt lease goes back to pending with attempt + 1', async () => {
    let now = 1_000;
    const { controller, worker } = await rig({ clock: () => now, promptLeaseTimeoutMs: 500, maxPromptAttempts: 3 });
    const other = await controller.registerRolloutWorker({ workerId: 'rollout-b' });
    await ingest(controller, 't0', 't1');
    await controller.leasePromptTasks(worker, 1);
    now = 1_400;
    assertDeepEqual(
      (await controller.leasePromptTasks(other, 5)).map((x) => x.taskId),
      ['t1'],
      'not yet expired',
    );
    now = 1_500;
    const [reclaimed] = await controller.leasePromptTasks(other, 5);
    assertDeepEqual([reclaimed.taskId, reclaimed.attempt], ['t0', 1], "dead worker's task reclaimed");
    assertDeepEqual((await controller.failPromptTasks(worker, ['t0'], 'late', true)).skipped, ['t0'], 'the dead worker no longer owns it');
    now = 2_000; // both leases of rollout-b expire: t1 (attempt 0 → 1), t0 (attempt 1 → 2)
    const tasks = await controller.leasePromptTasks(worker, 5);
    assertDeepEqual(
      tasks.map((x) => [x.taskId, x.attempt]),
      [
        ['t1', 1],
        ['t0', 2],
      ],
      'expired again, requeued in lease order',
    );
    now = 2_500;
    assertDeepEqual(
      (await controller.leasePromptTasks(worker, 5)).map((x) => x.taskId),
      ['t1'],
      't0 exhausted its 3 attempts',
    );
    assertEqual(
      (await controller.promptFailures())[0].reason,
      'prompt lease of worker rollout-a expired after 500 ms (attempts exhausted: 3)',
      'expiry reason',
    );
  });

  t.test('a fresh commit finishes a task even after its lease expired', async () => {
    let now = 0;
    const { controller, worker } = await rig({ clock: () => now, promptLeaseTimeoutMs: 10 });
    await ingest(controller, 't0');
    await controller.leasePromptTasks(worker, 1);
    now = 20;
    await controller.leasePromptTasks(worker, 0); // reclaims: t0 is pending again
    await controller.commitSamples(worker, [sampleRef('t0')]);
    const s = await controller.status();
    assertDeepEqual([s.prompts, s.promptsPending, s.promptsCompleted], [0, 0, 1], 'retired, not leased again');
  });

  t.test('completePromptTasks retires leased tasks without a ref; others are ignored', async () => {
    const { controller, worker } = await rig();
    await ingest(controller, 't0', 't1', 't2');
    await controller.leasePromptTasks(worker, 2);
    assertDeepEqual(await controller.completePromptTasks(worker, ['t0', 't2', 'zz']), ['t0'], 'only the leased one');
    const s = await controller.status();
    assertDeepEqual([s.prompts, s.promptsPending, s.promptsLeased, s.promptsCompleted], [2, 1, 1, 1], 'counts');
  });

  t.test('per-worker prompt lease cap', async () => {
    const { controller, worker } = await rig({ maxPromptLeasePerWorker: 3 });
    const other = await controller.registerRolloutWorker({ workerId: 'rollout-b' });
    await ingest(controller, 'a', 'b', 'c', 'd', 'e');
    assertEqual((await controller.leasePromptTasks(worker, 2)).length, 2, 'under the cap');
    assertEqual((await controller.leasePromptTasks(worker, 5)).length, 1, 'topped up to the cap');
    assertEqual((await controller.leasePromptTasks(worker, 5)).length, 0, 'at the cap');
    assertEqual((await controller.leasePromptTasks(other, 5)).length, 2, 'cap is per worker');
  });
});
