/**
 * Reference §8.7, control-plane parts of test_fault_injection and test_recovery. A "crash" is a
 * controller thrown away without closing anything; recovery is a new controller over a
 * FileMetadataStore reopened from the same files.
 */
import { defineSuite } from '../harness/suite.ts';
import { assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { DataFlowController } from '../../src/control/controller.ts';
import { FileMetadataStore } from '../../src/control/file-metadata-store.ts';
import { assertNoTensors } from '../../src/contracts/no-tensors.ts';
import { onlineSampleId } from '../../src/contracts/ids.ts';
import type { SampleRef } from '../../src/contracts/records.ts';
import { RUN_ID, sampleRef } from '../contracts/fixtures.ts';
import { counterHex, ingest, rig } from './controller-fixtures.ts';
import { tempFiles } from './temp-files.ts';

/** Features by sample id: stands in for the data plane's resident samples so aborts are observable. */
class ResidentFeatures {
  readonly resident = new Set<string>();
  readonly adopted: string[] = [];
  adopt(ref: SampleRef): void {
    this.adopted.push(ref.sampleId);
    this.resident.add(ref.sampleId);
  }
  abort(sampleId: string): void {
    this.resident.delete(sampleId);
  }
}

/** Commits s0, s1, s2 through a rollout worker and leases all three to the trainer. */
async function produceAndLease(controller: DataFlowController): Promise<SampleRef[]> {
  const worker = controller.registerRolloutWorker({ workerId: 'rollout-a' });
  const trainer = controller.registerTrainer({ trainerId: 'trainer-0' });
  ingest(controller, 's0', 's1', 's2');
  controller.leasePromptTasks(worker, 3);
  await controller.commitSamples(worker, ['s0', 's1', 's2'].map((id) => sampleRef(id)));
  return controller.leaseTrainRefs(trainer, 3);
}

/** Opens the store from the files a crashed process left; `open` collects stores to close at test end. */
async function restart(files: Parameters<typeof FileMetadataStore.open>[0], open: FileMetadataStore[]): Promise<DataFlowController> {
  const store = await FileMetadataStore.open(files);
  open.push(store);
  return new DataFlowController({ runId: RUN_ID, store, randomHex: counterHex() });
}

export default defineSuite('control/fault-injection', (t) => {
  t.test('rollout dies before writing features: prompt requeued with attempt 1, another worker takes it', () => {
    const { controller, worker } = rig();
    const other = controller.registerRolloutWorker({ workerId: 'rollout-b' });
    ingest(controller, 't0');
    controller.leasePromptTasks(worker, 1);
    controller.failPromptTasks(worker, ['t0'], 'generate_features raised', true);
    const [task] = controller.leasePromptTasks(other, 1);
    assertDeepEqual([task.taskId, task.attempt], ['t0', 1], 'requeued task');
  });

  t.test('terminal failure is visible in status and not requeued', async () => {
    const { controller, worker } = rig();
    ingest(controller, 't0', 't1');
    controller.leasePromptTasks(worker, 2);
    controller.failPromptTasks(worker, ['t0'], 'capture mismatch: layers [10,15,20] vs [10,15,21]', false);
    const s = await controller.status();
    assertDeepEqual([s.promptsFailed, s.promptsPending, s.promptsLeased], [1, 0, 1], 'failed / pending / leased');
    assertDeepEqual(controller.leasePromptTasks(worker, 5), [], 'not requeued');
    assertEqual(controller.promptFailures()[0].reason, 'capture mismatch: layers [10,15,20] vs [10,15,21]', 'reason kept');
  });

  t.test('dies after write, before commit: the retry reuses the id and the duplicate commit leaves 1 committed, depth 1', async () => {
    const { controller, worker } = rig();
    const other = controller.registerRolloutWorker({ workerId: 'rollout-b' });
    ingest(controller, 't0');
    controller.leasePromptTasks(worker, 1);
    controller.failPromptTasks(worker, ['t0'], 'worker lost after put', true);
    const [task] = controller.leasePromptTasks(other, 1);
    const retried = sampleRef(task.taskId);
    assertEqual(retried.sampleId, onlineSampleId(RUN_ID, 't0'), 'deterministic id');
    await controller.commitSamples(other, [retried]);
    await controller.commitSamples(worker, [sampleRef('t0')]); // the first worker's late commit
    const s = await controller.status();
    assertDeepEqual([s.samplesCommitted, s.queueDepth, s.prompts], [1, 1, 0], 'committed / depth / prompts');
  });

  t.test('a tensor in commit metadata is rejected and nothing is committed', async () => {
    const { controller, worker } = rig();
    const ref = { ...sampleRef('t0'), metadata: { target_repr: 'hidden_state', smuggled: { dtype: 'bf16', shape: [8], device: 'cuda' } } } as unknown as SampleRef;
    await assertRejects(() => controller.commitSamples(worker, [ref]), /commitSamples refs\[0\]\.metadata\.smuggled is a tensor-like value/, 'rejected');
    assertEqual((await controller.status()).samplesCommitted, 0, 'nothing committed');
  });

  t.test('failure records are tensor-free', async () => {
    const { controller, worker, trainer } = rig({ maxPromptAttempts: 1 });
    ingest(controller, 't0', 't1');
    controller.leasePromptTasks(worker, 2);
    controller.failPromptTasks(worker, ['t0'], 'oom', true);
    await controller.commitSamples(worker, [sampleRef('t1')]);
    const [ref] = await controller.leaseTrainRefs(trainer, 1);
    await controller.failRefs(trainer, [ref.sampleId], 'feature evicted', false);
    assertNoTensors({ prompts: controller.promptFailures(), refs: controller.queue.terminalFailures(), status: await controller.status() }, 'failures');
    assertDeepEqual(controller.queue.terminalFailures(), [{ sampleId: ref.sampleId, reason: 'feature evicted', attempts: 1 }], 'ref failure record');
    assertThrows(() => controller.failPromptTasks(worker, ['t1'], { error: new Float32Array(1) } as unknown as string, false), /reason must be a string/, 'a tensor cannot ride in a reason');
  });

  t.test('recovery: crash before ack → every committed ref requeued, none released', async ({ platform }) => {
    const tmp = tempFiles(platform, 'crash-before-ack');
    const open: FileMetadataStore[] = [];
    try {
      const crashed = await FileMetadataStore.open(tmp.files);
      open.push(crashed);
      const before = new DataFlowController({ runId: RUN_ID, store: crashed, randomHex: counterHex() });
      assertEqual((await produceAndLease(before)).length, 3, 'leased before the crash');
      const after = await restart(tmp.files, open);
      const features = new ResidentFeatures();
      const report = await after.reconcileOnRestart(features);
      assertDeepEqual(report.requeued, ['s0', 's1', 's2'].map((id) => onlineSampleId(RUN_ID, id)), 'requeued in commit order');
      assertDeepEqual(report.released, [], 'none released');
      assertEqual(after.queue.depth(), 3, 'queue depth');
      assertDeepEqual((await after.reconcileOnRestart(features)).requeued, [], 'reconcile is idempotent');
      assertEqual(after.queue.depth(), 3, 'no duplicates after a second reconcile');
    } finally {
      for (const store of open) await store.close(); // only now: each restart saw the files as the crash left them
      await tmp.cleanup();
    }
  });

  t.test('recovery: crash after a durable ack of {s0, s1} → those released (features aborted), s2 requeued', async ({ platform }) => {
    const tmp = tempFiles(platform, 'crash-after-ack');
    const open: FileMetadataStore[] = [];
    try {
      const crashed = await FileMetadataStore.open(tmp.files);
      open.push(crashed);
      const before = new DataFlowController({ runId: RUN_ID, store: crashed, randomHex: counterHex() });
      const leased = await produceAndLease(before);
      await before.ackTrainRefs('trainer-0', [leased[0].sampleId, leased[1].sampleId], { globalStep: 1, optimizerDurable: true });
      const after = await restart(tmp.files, open);
      const features = new ResidentFeatures();
      const report = await after.reconcileOnRestart(features);
      const [s0, s1, s2] = ['s0', 's1', 's2'].map((id) => onlineSampleId(RUN_ID, id));
      assertDeepEqual([report.released, report.requeued, report.globalStep, report.optimizerDurable], [[s0, s1], [s2], 1, true], 'released / requeued / step / durable');
      assertDeepEqual([features.adopted, [...features.resident]], [[s0, s1], []], 'released features adopted then aborted');
      const s = await after.status();
      assertDeepEqual([s.queueDepth, s.samplesCommitted, s.durableAcked, s.trainBacklog], [1, 3, 2, 1], 'depth / committed / acked / backlog');
    } finally {
      for (const store of open) await store.close(); // only now: each restart saw the files as the crash left them
      await tmp.cleanup();
    }
  });

  t.test('recovery: an ack that was not optimizer-durable releases nothing', async ({ platform }) => {
    const tmp = tempFiles(platform, 'not-durable');
    const open: FileMetadataStore[] = [];
    try {
      const crashed = await FileMetadataStore.open(tmp.files);
      open.push(crashed);
      const before = new DataFlowController({ runId: RUN_ID, store: crashed, randomHex: counterHex() });
      const leased = await produceAndLease(before);
      await before.ackTrainRefs('trainer-0', [leased[0].sampleId], { globalStep: 1, optimizerDurable: false });
      const report = await (await restart(tmp.files, open)).reconcileOnRestart();
      assertDeepEqual([report.released.length, report.requeued.length], [0, 3], 'all requeued (at-least-once training)');
    } finally {
      for (const store of open) await store.close(); // only now: each restart saw the files as the crash left them
      await tmp.cleanup();
    }
  });
});
