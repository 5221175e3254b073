/**
 * The spilling LocalFeatureStore (docs/durability.md §6): features of committed, not yet durably acked
 * samples survive a crash on disk. A "crash" here is a store (and controller) thrown away without
 * any clean-up; the restart is a new store over the same spill folder. Real processes killed with
 * SIGKILL are test/runtime/crash.ts. File-backed, so Node and Deno only (the browser's FileStore is
 * IndexedDB, whose durable path is the IndexedDB metadata store).
 */
import { DataFlowController } from '../../src/control/controller.ts';
import { FileMetadataStore } from '../../src/control/file-metadata-store.ts';
import { spillPath } from '../../src/data/feature-spill.ts';
import { FeatureNotFoundError, FeatureSpillError, parseMemUri } from '../../src/data/feature-store.ts';
import { LocalFeatureStore } from '../../src/data/local-feature-store.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import type { FileStore } from '../../src/ports/storage.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';

const FILES_ONLY = { only: ['node', 'deno'] as const };

function sample(gpu: Gpu, seed: number) {
  return {
    input_ids: gpu.upload([4], 'i32', [seed, seed + 1, seed + 2, -seed]),
    hidden_state: gpu.upload(
      [4, 2],
      'f32',
      Array.from({ length: 8 }, (_, i) => seed + i / 8),
    ),
  };
}

async function values(gpu: Gpu, tensors: Record<string, { dtype: string }>): Promise<Record<string, number[]>> {
  const out: Record<string, number[]> = {};
  for (const [name, t] of Object.entries(tensors)) out[name] = [...(await gpu.read(t as Parameters<Gpu['read']>[0]))];
  return out;
}

const generationOf = (uri: string) => parseMemUri(uri).generation;

export default defineSuite('runtime/spill', (t) => {
  t.test(
    'put is on disk before its ref exists; release keeps the file, a later get re-reads it; abort deletes it',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'spill-basic');
      try {
        const store = new LocalFeatureStore(gpu, { storeId: 'sp', spill: tmp.files });
        const pending = store.put(sample(gpu, 3), 'run:a', { runId: 'run' });
        assertEqual(store.health().residentSamples, 0, 'not registered while the file is being written');
        const ref = await pending;
        const file = new SafetensorsFile(await tmp.files.read(spillPath('run:a')));
        assertDeepEqual([file.entry('input_ids').dtype, file.entry('hidden_state').dtype], ['I32', 'F32'], 'dtypes as on the GPU');
        assertDeepEqual([...file.i32('input_ids')], [3, 4, 5, -3], 'ids on disk');
        assertEqual(Number(file.header.metadata.generation), generationOf(ref.featureStoreUri), 'file records the generation');
        const first = await store.get(ref);
        const expected = await values(gpu, first.tensors);
        store.release(first.handle);
        assertEqual(store.health().residentSamples, 0, 'GPU copy freed on the last release');
        assert(await tmp.files.exists(spillPath('run:a')), 'file kept until the durable ack');
        const again = await store.get(ref);
        assertDeepEqual(await values(gpu, again.tensors), expected, 're-materialised from the spill');
        store.release(again.handle);
        assertEqual(store.health().spill?.reads, 1, 'one spill read');
        await store.abort('run:a');
        assert(!(await tmp.files.exists(spillPath('run:a'))), 'abort deletes the file');
        await assertRejects(() => store.get(ref), /not resident in store "sp" and has no spill file/, 'gone after abort');
        assertEqual(gpu.pool.stats().liveBuffers, 0, 'no buffer leaked');
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    FILES_ONLY,
  );

  t.test(
    'a restarted store serves refs of the crashed one from the spill; stale generations stay refused; re-puts outrank the file',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'spill-restart');
      try {
        const before = new LocalFeatureStore(gpu, { storeId: 'sp', spill: tmp.files });
        const old = await before.put(sample(gpu, 1), 'x');
        const current = await before.put(sample(gpu, 2), 'x');
        const after = new LocalFeatureStore(gpu, { storeId: 'sp', spill: tmp.files });
        const got = await after.get(current);
        assertDeepEqual((await values(gpu, got.tensors)).input_ids, [2, 3, 4, -2], 'the latest put survives');
        after.release(got.handle);
        const err = await assertRejects(
          () => after.get(old),
          /stale ref for sample x: generation \d+, spilled generation \d+/,
          'stale after restart',
        );
        assert(err instanceof FeatureNotFoundError, err.name);
        const reput = await after.put(sample(gpu, 5), 'x');
        assert(
          generationOf(reput.featureStoreUri) > generationOf(current.featureStoreUri),
          'a re-put after the restart gets a larger generation than the file',
        );
        await after.abort('x');
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    FILES_ONLY,
  );

  t.test(
    'controller: durable ack deletes spills; reconcile releases acked, drops uncommitted, requeued refs train from the spill; adopt renews the generation',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'spill-controller');
      const spill = platform.files(`${tmp.files.root}/spill`);
      try {
        const metadata = await FileMetadataStore.open(tmp.files);
        const store = new LocalFeatureStore(gpu, { storeId: 'sp', spill });
        const controller = new DataFlowController({ runId: 'run', store: metadata, featureStore: store });
        const worker = await controller.registerRolloutWorker({ workerId: 'w' });
        const trainer = await controller.registerTrainer({ trainerId: 'tr' });
        const refs = [];
        for (const id of ['run:s0', 'run:s1', 'run:s2']) refs.push(await store.put(sample(gpu, refs.length), id, { runId: 'run' }));
        await controller.commitSamples(worker, refs);
        await store.put(sample(gpu, 9), 'run:orphan', { runId: 'run' });
        await controller.leaseTrainRefs(trainer, 3);
        await controller.ackTrainRefs(trainer, ['run:s1'], { globalStep: 1, optimizerDurable: false });
        assert(await spill.exists(spillPath('run:s1')), 'a non-durable ack keeps the spill (a restart would requeue the sample)');
        await controller.ackTrainRefs(trainer, ['run:s0'], { globalStep: 2, optimizerDurable: true });
        assertDeepEqual((await store.spilledSampleIds()).sort(), ['run:orphan', 'run:s1', 'run:s2'], 'the durably acked spill is deleted');
        // Crash: nothing is closed; a new process reopens the journal over the same folders.
        const reopened = await FileMetadataStore.open(tmp.files);
        const restarted = new LocalFeatureStore(gpu, { storeId: 'sp', spill });
        const after = new DataFlowController({ runId: 'run', store: reopened, featureStore: restarted });
        const report = await after.reconcileOnRestart(restarted);
        assertDeepEqual(
          [report.released, report.requeued, report.droppedUncommitted],
          [['run:s0', 'run:s1'], ['run:s2'], ['run:orphan']],
          'released / requeued / dropped',
        );
        assertDeepEqual(await restarted.spilledSampleIds(), ['run:s2'], 'released (adopted, then aborted) and uncommitted spills are gone');
        assertEqual(restarted.health().residentSamples, 0, 'nothing loaded before a trainer asks');
        const [ref] = await after.leaseTrainRefs(await after.registerTrainer({ trainerId: 'tr2' }), 3);
        assertEqual(ref.featureStoreUri, refs[2].featureStoreUri, 'the requeued ref is the committed one, unchanged');
        const { tensors, handle } = await restarted.get(ref);
        assertDeepEqual((await values(gpu, tensors)).input_ids, [2, 3, 4, -2], 'requeued features come from the spill');
        restarted.release(handle);
        const adopted = await restarted.adopt(ref);
        assert(
          adopted !== undefined && generationOf(adopted.featureStoreUri) > generationOf(ref.featureStoreUri),
          'adopt returns a fresh generation',
        );
        assertEqual(restarted.health().residentSamples, 1, 'adopt makes the sample resident');
        await assertRejects(() => restarted.get(ref), /stale ref/, 'the pre-adopt ref is stale');
        const fresh = await restarted.get(adopted!);
        restarted.release(fresh.handle);
        const reread = await restarted.get(adopted!);
        restarted.release(reread.handle);
        assertEqual(await restarted.adopt(refs[0]), undefined, 'nothing to adopt once released');
        await after.ackTrainRefs('tr2', ['run:s2'], { globalStep: 3, optimizerDurable: true });
        assertDeepEqual(await restarted.spilledSampleIds(), [], 'all spills deleted after the durable acks');
        await reopened.close();
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    FILES_ONLY,
  );

  t.test(
    'a failing spill write fails the put naming the file: nothing is stored and the caller keeps its tensors',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'spill-fail');
      try {
        const broken: FileStore = Object.assign(Object.create(tmp.files) as FileStore, {
          writeAtomic: async () => {
            throw new Error('ENOSPC: no space left on device');
          },
        });
        const store = new LocalFeatureStore(gpu, { storeId: 'sp', spill: broken });
        const before = store.health();
        const tensors = sample(gpu, 7);
        const err = await assertRejects(
          () => store.put(tensors, 'run:full'),
          /put run:full: writing the spill file .*run%3Afull\.safetensors failed, nothing was stored: ENOSPC/,
          'spill failure',
        );
        assert(err instanceof FeatureSpillError, err.name);
        assertDeepEqual(
          [store.health().residentSamples, store.health().residentBytes],
          [before.residentSamples, before.residentBytes],
          'nothing resident',
        );
        assertDeepEqual([...(await gpu.read(tensors.input_ids))], [7, 8, 9, -7], 'caller tensors intact');
        gpu.release(...Object.values(tensors));
        assertEqual(gpu.pool.stats().liveBuffers, 0, 'no buffer leaked');
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    FILES_ONLY,
  );
});
