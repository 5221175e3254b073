/**
 * docs/durability.md §10, control-plane parts of test_fault_injection and test_recovery. A "crash" is a
 * controller thrown away without closing anything; recovery is a new controller over the durable
 * store reopened from the same place: a FileMetadataStore on the same files (Node, Deno), or an
 * IndexedDbMetadataStore on the same database name (browser). The closed-tab version of the
 * browser crash is test/runners/browser-crash.ts.
 */
import { defineSuite, type SuiteBuilder } from '../harness/suite.ts';
import { assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { DataFlowController } from '../../src/control/controller.ts';
import { FileMetadataStore } from '../../src/control/file-metadata-store.ts';
import { IndexedDbMetadataStore } from '../../src/control/indexeddb-metadata-store.ts';
import type { MetadataStore } from '../../src/control/metadata-store.ts';
import type { RuntimeName } from '../../src/ports/runtime.ts';
import type { Platform } from '../../src/cli/platform.ts';
import { assertNoTensors } from '../../src/contracts/no-tensors.ts';
import { onlineSampleId } from '../../src/contracts/ids.ts';
import type { SampleRef } from '../../src/contracts/records.ts';
import { RUN_ID, sampleRef } from '../contracts/fixtures.ts';
import { counterHex, ingest, rig } from './controller-fixtures.ts';
import { tempFiles } from './temp-files.ts';
import { tempDatabase } from './temp-database.ts';

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
  const worker = await controller.registerRolloutWorker({ workerId: 'rollout-a' });
  const trainer = await controller.registerTrainer({ trainerId: 'trainer-0' });
  await ingest(controller, 's0', 's1', 's2');
  await controller.leasePromptTasks(worker, 3);
  await controller.commitSamples(
    worker,
    ['s0', 's1', 's2'].map((id) => sampleRef(id)),
  );
  return controller.leaseTrainRefs(trainer, 3);
}

/** A durable store backend the recovery tests run against. */
interface DurableBackend {
  /** Test-name prefix. */
  readonly prefix: string;
  readonly only: readonly RuntimeName[];
  /** A fresh, empty location: `open` opens a store on it (again after a crash), `cleanup` removes it. */
  place(platform: Platform, label: string): { open(): Promise<MetadataStore>; cleanup(): Promise<void> };
}

const FILE_JOURNAL: DurableBackend = {
  prefix: 'recovery',
  only: ['node', 'deno'],
  place(platform, label) {
    const tmp = tempFiles(platform, label);
    return { open: () => FileMetadataStore.open(tmp.files), cleanup: tmp.cleanup };
  },
};

const INDEXEDDB: DurableBackend = {
  prefix: 'recovery (IndexedDB, reopened by database name)',
  only: ['browser'],
  place(platform, label) {
    const db = tempDatabase(platform, label);
    return { open: () => IndexedDbMetadataStore.open(platform, db.name), cleanup: db.cleanup };
  },
};

/**
 * Runs `body` with a crash rig on a fresh location: `crashed()` is the controller of the process
 * that dies (never closed), `restart()` a new controller over a store reopened from the same place.
 */
async function withCrashRig(
  backend: DurableBackend,
  platform: Platform,
  label: string,
  body: (rig: { crashed(): Promise<DataFlowController>; restart(): Promise<DataFlowController> }) => Promise<void>,
): Promise<void> {
  const place = backend.place(platform, label);
  const open: MetadataStore[] = [];
  const controllerOnNewStore = async (): Promise<DataFlowController> => {
    const store = await place.open();
    open.push(store);
    return new DataFlowController({ runId: RUN_ID, store, randomHex: counterHex() });
  };
  try {
    await body({ crashed: controllerOnNewStore, restart: controllerOnNewStore });
  } finally {
    for (const store of open) await store.close(); // only now: each restart saw the store as the crash left it
    await place.cleanup();
  }
}

function recoveryTests(t: SuiteBuilder, backend: DurableBackend): void {
  const only = { only: backend.only };

  t.test(
    `${backend.prefix}: crash before ack → every committed ref requeued, none released`,
    async ({ platform }) => {
      await withCrashRig(backend, platform, 'crash-before-ack', async ({ crashed, restart }) => {
        assertEqual((await produceAndLease(await crashed())).length, 3, 'leased before the crash');
        const after = await restart();
        const features = new ResidentFeatures();
        const report = await after.reconcileOnRestart(features);
        assertDeepEqual(
          report.requeued,
          ['s0', 's1', 's2'].map((id) => onlineSampleId(RUN_ID, id)),
          'requeued in commit order',
        );
        assertDeepEqual(report.released, [], 'none released');
        assertEqual(await after.queue.depth(), 3, 'queue depth');
        assertDeepEqual((await after.reconcileOnRestart(features)).requeued, [], 'reconcile is idempotent');
        assertEqual(await after.queue.depth(), 3, 'no duplicates after a second reconcile');
      });
    },
    only,
  );

  t.test(
    `${backend.prefix}: crash after a durable ack of {s0, s1} → those released (features aborted), s2 requeued`,
    async ({ platform }) => {
      await withCrashRig(backend, platform, 'crash-after-ack', async ({ crashed, restart }) => {
        const before = await crashed();
        const leased = await produceAndLease(before);
        await before.ackTrainRefs('trainer-0', [leased[0].sampleId, leased[1].sampleId], { globalStep: 1, optimizerDurable: true });
        const after = await restart();
        const features = new ResidentFeatures();
        const report = await after.reconcileOnRestart(features);
        const [s0, s1, s2] = ['s0', 's1', 's2'].map((id) => onlineSampleId(RUN_ID, id));
        assertDeepEqual(
          [report.released, report.requeued, report.globalStep, report.optimizerDurable],
          [[s0, s1], [s2], 1, true],
          'released / requeued / step / durable',
        );
        assertDeepEqual([features.adopted, [...features.resident]], [[s0, s1], []], 'released features adopted then aborted');
        const s = await after.status();
        assertDeepEqual(
          [s.queueDepth, s.samplesCommitted, s.durableAcked, s.trainBacklog],
          [1, 3, 2, 1],
          'depth / committed / acked / backlog',
        );
      });
    },
    only,
  );

  t.test(
    `${backend.prefix}: an ack that was not optimizer-durable releases nothing`,
    async ({ platform }) => {
      await withCrashRig(backend, platform, 'not-durable', async ({ crashed, restart }) => {
        const before = await crashed();
        const leased = await produceAndLease(before);
        await before.ackTrainRefs('trainer-0', [leased[0].sampleId], { globalStep: 1, optimizerDurable: false });
        const report = await (await restart()).reconcileOnRestart();
        assertDeepEqual([report.released.length, report.requeued.length], [0, 3], 'all requeued (at-least-once training)');
      });
    },
    only,
  );
}

export default defineSuite('control/fault-injection', (t) => {
  t.test('rollout dies before writing features: prompt requeued with attempt 1, another worker takes it', async () => {
    const { controller, worker } = await rig();
    const other = await controller.registerRolloutWorker({ workerId: 'rollout-b' });
    await ingest(controller, 't0');
    await controller.leasePromptTasks(worker, 1);
    await controller.failPromptTasks(worker, ['t0'], 'generate_features raised', true);
    const [task] = await controller.leasePromptTasks(other, 1);
    assertDeepEqual([task.taskId, task.attempt], ['t0', 1], 'requeued task');
  });

  t.test('terminal failure is visible in status and not requeued', async () => {
    const { controller, worker } = await rig();
    await ingest(controller, 't0', 't1');
    await controller.leasePromptTasks(worker, 2);
    await controller.failPromptTasks(worker, ['t0'], 'capture mismatch: layers [10,15,20] vs [10,15,21]', false);
    const s = await controller.status();
    assertDeepEqual([s.promptsFailed, s.promptsPending, s.promptsLeased], [1, 0, 1], 'failed / pending / leased');
    assertDeepEqual(await controller.leasePromptTasks(worker, 5), [], 'not requeued');
    assertEqual((await controller.promptFailures())[0].reason, 'capture mismatch: layers [10,15,20] vs [10,15,21]', 'reason kept');
  });

  t.test('dies after write, before commit: the retry reuses the id and the duplicate commit leaves 1 committed, depth 1', async () => {
    const { controller, worker } = await rig();
    const other = await controller.registerRolloutWorker({ workerId: 'rollout-b' });
    await ingest(controller, 't0');
    await controller.leasePromptTasks(worker, 1);
    await controller.failPromptTasks(worker, ['t0'], 'worker lost after put', true);
    const [task] = await controller.leasePromptTasks(other, 1);
    const retried = sampleRef(task.taskId);
    assertEqual(retried.sampleId, onlineSampleId(RUN_ID, 't0'), 'deterministic id');
    await controller.commitSamples(other, [retried]);
    await controller.commitSamples(worker, [sampleRef('t0')]); // the first worker's late commit
    const s = await controller.status();
    assertDeepEqual([s.samplesCommitted, s.queueDepth, s.prompts], [1, 1, 0], 'committed / depth / prompts');
  });

  t.test('a tensor in commit metadata is rejected and nothing is committed', async () => {
    const { controller, worker } = await rig();
    const ref = {
      ...sampleRef('t0'),
      metadata: { target_repr: 'hidden_state', smuggled: { dtype: 'bf16', shape: [8], device: 'cuda' } },
    } as unknown as SampleRef;
    await assertRejects(
      () => controller.commitSamples(worker, [ref]),
      /commitSamples refs\[0\]\.metadata\.smuggled is a tensor-like value/,
      'rejected',
    );
    assertEqual((await controller.status()).samplesCommitted, 0, 'nothing committed');
  });

  t.test('failure records are tensor-free', async () => {
    const { controller, worker, trainer } = await rig({ maxPromptAttempts: 1 });
    await ingest(controller, 't0', 't1');
    await controller.leasePromptTasks(worker, 2);
    await controller.failPromptTasks(worker, ['t0'], 'oom', true);
    await controller.commitSamples(worker, [sampleRef('t1')]);
    const [ref] = await controller.leaseTrainRefs(trainer, 1);
    await controller.failRefs(trainer, [ref.sampleId], 'feature evicted', false);
    assertNoTensors(
      { prompts: await controller.promptFailures(), refs: await controller.queue.terminalFailures(), status: await controller.status() },
      'failures',
    );
    assertDeepEqual(
      await controller.queue.terminalFailures(),
      [{ sampleId: ref.sampleId, reason: 'feature evicted', attempts: 1 }],
      'ref failure record',
    );
    await assertRejects(
      () => controller.failPromptTasks(worker, ['t1'], { error: new Float32Array(1) } as unknown as string, false),
      /reason must be a string/,
      'a tensor cannot ride in a reason',
    );
  });

  for (const backend of [FILE_JOURNAL, INDEXEDDB]) recoveryTests(t, backend);
});
