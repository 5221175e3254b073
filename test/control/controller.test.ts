/** docs/control-plane.md §10: controller no-tensor gate, convergence, idempotent commit, seam fixes, TrainLease. */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { InMemoryMetadataStore, type TrainAck } from '../../src/control/metadata-store.ts';
import type { RefQueue } from '../../src/control/control-stores.ts';
import { assertNoTensors } from '../../src/contracts/no-tensors.ts';
import { offlineSampleId } from '../../src/contracts/ids.ts';
import { makeSampleRef, type SampleRef } from '../../src/contracts/records.ts';
import { RUN_ID, sampleRef } from '../contracts/fixtures.ts';
import { ingest, rig } from './controller-fixtures.ts';

const ids = (refs: readonly SampleRef[]): string[] => refs.map((r) => r.sampleId);

function offlineRef(index: number): SampleRef {
  const sampleId = offlineSampleId(RUN_ID, index);
  return makeSampleRef({
    sampleId,
    runId: RUN_ID,
    sourceTaskId: null,
    featureStoreUri: `file:///data/features/data_${index}.ckpt`,
    featureKeys: { input_ids: 'input_ids', hidden_state: 'hidden_state' },
    featureSpecs: {},
    strategy: 'eagle3',
    metadata: { format: 'eagle3-ckpt', file_index: index },
  });
}

/** A real in-memory store that notes queue state when the ack transaction runs, and can be made to fail. */
class ObservedStore extends InMemoryMetadataStore {
  queue: RefQueue | undefined;
  inFlightAtRecord: number[] = [];
  failNext = false;
  override async recordTrainAck(sampleIds: readonly string[], ack: TrainAck): Promise<void> {
    this.inFlightAtRecord.push(await this.queue!.inFlight());
    if (this.failNext) {
      this.failNext = false;
      throw new Error('disk full');
    }
    await super.recordTrainAck(sampleIds, ack);
  }
}

export default defineSuite('control/controller', (t) => {
  t.test('controller carries no tensor: every entry point rejects tensors with their path', async () => {
    const { controller, worker, trainer } = await rig();
    await assertRejects(
      () => controller.ingestPrompts([{ taskId: 'x', payload: { hidden: new Float32Array(4) } }]),
      /ingestPrompts prompts\[0\]\.payload\.hidden is a tensor-like value/,
      'prompt payload',
    );
    await assertRejects(
      () => controller.registerRolloutWorker({ cache: { dtype: 'f32', shape: [1], device: 'gpu' } }),
      /registerRolloutWorker\.info\.cache is a tensor-like value/,
      'worker info',
    );
    const smuggled = { ...sampleRef('t0'), metadata: { logits: new Uint16Array(8) } } as unknown as SampleRef;
    await assertRejects(
      () => controller.commitSamples(worker, [smuggled]),
      /commitSamples refs\[0\]\.metadata\.logits is a tensor-like value/,
      'online ref',
    );
    await assertRejects(
      () => controller.enqueueOfflineRefs([offlineRef(0), smuggled]),
      /enqueueOfflineRefs refs\[1\]\.metadata\.logits/,
      'offline ref',
    );
    await assertRejects(
      () => controller.ackTrainRefs(trainer, [new Uint8Array(2)] as unknown as string[]),
      /ackTrainRefs: sampleIds\[0\] is a tensor-like value/,
      'ack ids',
    );
    const status = await controller.status();
    assertNoTensors(status, 'status');
    assertEqual(status.samplesCommitted, 0, 'nothing committed');
    assertEqual(status.prompts, 0, 'nothing ingested');
  });

  t.test('online and offline refs converge at the same queue', async () => {
    const { controller, worker, trainer } = await rig();
    await ingest(controller, 't0');
    await controller.leasePromptTasks(worker, 1);
    await controller.commitSamples(worker, [sampleRef('t0')]);
    await controller.enqueueOfflineRefs([offlineRef(0), offlineRef(1)]);
    const lease = await controller.trainLease(trainer);
    assertDeepEqual(ids(await lease.get(10)), [`${RUN_ID}:t0`, `${RUN_ID}:00000000`, `${RUN_ID}:00000001`], 'one FIFO for both');
  });

  t.test('commitSamples is idempotent: a duplicate commit leaves committed 1, depth 1', async () => {
    const { controller, worker } = await rig();
    assertEqual((await controller.commitSamples(worker, [sampleRef('t0')])).length, 1, 'first commit fresh');
    assertDeepEqual(await controller.commitSamples(worker, [sampleRef('t0')]), [], 'duplicate returns no fresh refs');
    const status = await controller.status();
    assertEqual(status.samplesCommitted, 1, 'committed');
    assertEqual(status.queueDepth, 1, 'depth');
  });

  t.test('prompt lease, then commit clears the lease and retires the task', async () => {
    const { controller, worker } = await rig();
    await ingest(controller, 't0', 't1');
    const tasks = await controller.leasePromptTasks(worker, 5);
    assertDeepEqual(
      tasks.map((x) => x.taskId),
      ['t0', 't1'],
      'leased in order',
    );
    assertEqual(tasks[0].runId, RUN_ID, 'task stamped with the run id');
    await controller.commitSamples(worker, [sampleRef('t0')]);
    const s = await controller.status();
    assertDeepEqual(
      [s.prompts, s.promptsPending, s.promptsLeased, s.promptsCompleted],
      [1, 0, 1, 1],
      'prompts / pending / leased / completed',
    );
  });

  t.test('one bad ref rejects the whole batch; nothing is committed or released', async () => {
    const { controller, worker } = await rig();
    await ingest(controller, 't0', 't1');
    await controller.leasePromptTasks(worker, 2);
    const bad = { ...sampleRef('t1'), numTokens: -3 } as SampleRef;
    await assertRejects(
      () => controller.commitSamples(worker, [sampleRef('t0'), bad]),
      /commitSamples refs\[1\] is invalid[\s\S]*numTokens/,
      'bad batch',
    );
    const s = await controller.status();
    assertDeepEqual([s.samplesCommitted, s.queueDepth, s.promptsLeased], [0, 0, 2], 'committed / depth / leased unchanged');
  });

  t.test('ingest: defaults, preserved task ids, minted ids, payload defaulting, idempotent re-ingest', async () => {
    const { controller } = await rig();
    const [given, minted] = await controller.ingestPrompts([
      { taskId: 'keep-me', payload: { text: 'hi' }, maxLength: 512 },
      { text: 'whole dict is the payload' },
    ]);
    assertEqual(given, 'keep-me', 'task id preserved');
    assert(/^task-[0-9a-f]{12}$/.test(minted), `minted id ${minted}`);
    const a = (await controller.promptTask('keep-me'))!;
    assertDeepEqual([a.sourceId, a.maxLength, a.attempt, a.targetModelVersion], ['prompt_source', 512, 0, 'unknown'], 'defaults');
    assertDeepEqual((await controller.promptTask(minted))!.payload, { text: 'whole dict is the payload' }, 'payload = whole dict');
    await controller.ingestPrompts([{ taskId: 'keep-me', payload: { text: 'again' } }]);
    assertEqual((await controller.promptTask('keep-me'))!.payload.text, 'hi', 'pending task not overwritten');
    await assertRejects(
      () => controller.ingestPrompts([{ payload: {}, text: 'stray' }]),
      /unknown field\(s\) text; prompt data belongs under payload/,
      'stray field next to payload',
    );
    await assertRejects(() => controller.ingestPrompts([{ payload: {}, maxLength: 0 }]), /maxLength/, 'bad maxLength');
  });

  t.test('ack records the durable marker before releasing leases (step 7, durable)', async () => {
    const store = new ObservedStore();
    const { controller, trainer } = await rig({ store });
    store.queue = controller.queue;
    await controller.enqueueOfflineRefs([offlineRef(0), offlineRef(1)]);
    const refs = await controller.leaseTrainRefs(trainer, 2);
    const result = await controller.ackTrainRefs(trainer, ids(refs), { globalStep: 7, optimizerDurable: true });
    assertDeepEqual(store.inFlightAtRecord, [2], 'leases still held while the ack transaction ran');
    assertEqual(result.released, 2, 'released after the record');
    const marker = await store.durableMarker();
    assertDeepEqual([[...marker.acked].sort(), marker.globalStep, marker.optimizerDurable], [ids(refs), 7, true], 'marker');
    assertEqual(await controller.queue.inFlight(), 0, 'queue in flight');
  });

  t.test('a failed ack transaction keeps the leases; a retry releases them', async () => {
    const store = new ObservedStore();
    const { controller, trainer } = await rig({ store });
    store.queue = controller.queue;
    await controller.enqueueOfflineRefs([offlineRef(0)]);
    const refs = await controller.leaseTrainRefs(trainer, 1);
    store.failNext = true;
    await assertRejects(
      () => controller.ackTrainRefs(trainer, ids(refs), { globalStep: 1, optimizerDurable: true }),
      /disk full/,
      'store failure surfaces',
    );
    assertEqual(await controller.queue.inFlight(), 1, 'lease kept');
    assertEqual((await store.durableMarker()).acked.size, 0, 'nothing acked');
    assertEqual(
      (await controller.ackTrainRefs(trainer, ids(refs), { globalStep: 1, optimizerDurable: true })).released,
      1,
      'retry releases',
    );
  });

  t.test('ack without a step still releases and leaves the step', async () => {
    const { controller, trainer, store } = await rig();
    await controller.enqueueOfflineRefs([offlineRef(0)]);
    const refs = await controller.leaseTrainRefs(trainer, 1);
    assertEqual((await controller.ackTrainRefs(trainer, ids(refs))).released, 1, 'released');
    const marker = await store.durableMarker();
    assertDeepEqual([marker.globalStep, marker.optimizerDurable, marker.acked.size], [null, false, 1], 'marker');
  });

  t.test('TrainLease routes get / ack / fail through the controller', async () => {
    const { controller, store } = await rig();
    const lease = await controller.trainLease();
    assert(/^trainer-[0-9a-f]{8}$/.test(lease.trainerId), `trainer registered (${lease.trainerId})`);
    await controller.enqueueOfflineRefs([0, 1, 2].map(offlineRef));
    const batch = await lease.get(2);
    await lease.ack(batch, { globalStep: 1, optimizerDurable: true });
    assertEqual((await store.durableMarker()).acked.size, 2, 'ack reached the store');
    const [last] = await lease.get(1);
    assertDeepEqual(await lease.fail([last], 'loader error', true), { requeued: [last.sampleId], terminal: [] }, 'retryable fail');
    assertDeepEqual(
      await lease.fail(await lease.get(1), 'feature evicted', false),
      { requeued: [], terminal: [last.sampleId] },
      'terminal fail',
    );
    const s = await controller.status();
    assertDeepEqual(
      [s.queueDepth, s.queueInFlight, s.queueTerminal, s.trainBacklog],
      [0, 0, 1, 1],
      'depth / in flight / terminal / backlog',
    );
    await assertRejects(
      () => controller.trainLease('nobody'),
      /trainLease: unknown trainer "nobody"; call registerTrainer first/,
      'unknown trainer',
    );
  });

  t.test('partition keys are accepted and honoured', async () => {
    const { controller, worker, trainer } = await rig();
    await controller.commitSamples(worker, [sampleRef('t0')], { partitionKey: 'dp1' });
    await controller.enqueueOfflineRefs([offlineRef(0)], { partitionKey: 'dp0' });
    assertDeepEqual(await (await controller.trainLease(trainer)).get(5), [], 'default partition is empty');
    assertDeepEqual(ids(await (await controller.trainLease(trainer, { partitionKey: 'dp1' })).get(5)), [`${RUN_ID}:t0`], 'dp1');
    assertDeepEqual(ids(await controller.leaseTrainRefs(trainer, 5, undefined, { partitionKey: 'dp0' })), [`${RUN_ID}:00000000`], 'dp0');
  });

  t.test('unknown workers and bad arguments are rejected by name', async () => {
    const { controller, worker } = await rig();
    await assertRejects(
      () => controller.leasePromptTasks('ghost', 1),
      /leasePromptTasks: unknown rollout worker "ghost"; call registerRolloutWorker first/,
      'unknown worker',
    );
    await assertRejects(() => controller.leasePromptTasks(worker, -1), /maxTasks must be a non-negative integer/, 'negative lease size');
    await assertRejects(
      () => controller.failPromptTasks(worker, ['t0'], 42 as unknown as string, true),
      /reason must be a string/,
      'non-string reason',
    );
    await assertRejects(() => controller.commitSamples('ghost', []), /commitSamples: unknown rollout worker/, 'commit from unknown worker');
    await assertRejects(
      () => controller.registerTrainer({ trainerId: '' }),
      /info\.trainerId must be a non-empty string/,
      'empty trainer id',
    );
    assertEqual(await controller.registerRolloutWorker({ workerId: worker, host: 'other' }), worker, 're-registration keeps the id');
    assertEqual((await controller.status()).rolloutWorkers, 1, 're-registration overwrites');
  });
});
