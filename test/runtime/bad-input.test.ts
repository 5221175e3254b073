/**
 * Bad input across the runtime loop: each case must fail with an error that names the thing at
 * fault, and lose nothing (counts of committed, acked, leased, resident samples and GPU buffers are
 * compared before and after).
 */
import type { PromptTask, SampleRef } from '../../src/contracts/index.ts';
import { UnknownSampleError } from '../../src/control/committed-refs.ts';
import { DataFlowController } from '../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../src/control/metadata-store.ts';
import { HomogeneityError, FeatureDataLoader } from '../../src/data/feature-dataloader.ts';
import { spillPath } from '../../src/data/feature-spill.ts';
import { FeatureNotFoundError, FeatureSpillError, FeatureStoreBudgetError, parseMemUri } from '../../src/data/feature-store.ts';
import { LocalFeatureStore } from '../../src/data/local-feature-store.ts';
import { OfflineManifestReader } from '../../src/data/offline-manifest.ts';
import { writeSafetensors } from '../../src/formats/safetensors-writer.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { CaptureMismatchError, type CaptureConfig } from '../../src/inference/capture.ts';
import { RolloutWorker, type CapturedFeatures, type FeatureSource } from '../../src/inference/rollout-worker.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { bigramPrompts, ToyEmbeddingTarget } from '../inference/toy-target.ts';

const V = 16;
const H = 8;
const FILES_ONLY = { only: ['node', 'deno'] as const };

/** The toy target, with one task's capture damaged by `damage` (the rest are real). */
class DamagingSource implements FeatureSource {
  constructor(
    private readonly gpu: Gpu,
    private readonly inner: ToyEmbeddingTarget,
    private readonly victim: number,
    private readonly damage: (gpu: Gpu, features: CapturedFeatures) => CapturedFeatures,
  ) {}
  async generateFeatures(tasks: readonly PromptTask[], capture: CaptureConfig): Promise<CapturedFeatures[]> {
    const out = await this.inner.generateFeatures(tasks, capture);
    return out.map((f, i) => (i === this.victim ? this.damage(this.gpu, f) : f));
  }
}

async function rig(gpu: Gpu, capture: CaptureConfig, source: (target: ToyEmbeddingTarget) => FeatureSource, prompts = 3) {
  const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
  const store = new LocalFeatureStore(gpu);
  const target = new ToyEmbeddingTarget(gpu, V, H);
  const worker = await RolloutWorker.create(controller, source(target), store, gpu, capture, { workerId: 'w0' });
  await controller.ingestPrompts(bigramPrompts(prompts, V).map((p, i) => ({ taskId: `t${i}`, payload: p, maxLength: 64 })));
  return { controller, store, worker };
}

async function counts(controller: DataFlowController, store: LocalFeatureStore) {
  const s = await controller.status();
  return {
    committed: s.samplesCommitted,
    acked: s.durableAcked,
    depth: s.queueDepth,
    inFlight: s.queueInFlight,
    resident: store.health().residentSamples,
    leases: store.health().activeLeases,
  };
}

function shard(len: number, seed: number): Uint8Array {
  const bytes = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  return writeSafetensors({
    input_ids: { dtype: 'I32', shape: [len], data: bytes(Int32Array.from({ length: len }, (_, i) => seed + i)) },
    loss_mask: { dtype: 'I32', shape: [len], data: bytes(Int32Array.from({ length: len }, () => 1)) },
    hidden_state: { dtype: 'F32', shape: [len, H], data: bytes(Float32Array.from({ length: len * H }, (_, i) => seed + i / 100)) },
    aux_hidden_state: {
      dtype: 'F32',
      shape: [len, 3 * H],
      data: bytes(Float32Array.from({ length: len * 3 * H }, (_, i) => -seed - i / 100)),
    },
  });
}

export default defineSuite('runtime/bad-input', (t) => {
  t.test(
    'a capture with a wrong shape: only that task fails (terminally, naming sample and widths); the rest commit; nothing leaks',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      // One aux layer of width H: the draft input must be exactly H wide.
      const capture: CaptureConfig = {
        featureNames: ['input_ids', 'hidden_state', 'labels'],
        auxLayerIds: [0],
        targetRepr: 'hidden_state',
        targetHiddenSize: H,
      };
      const { controller, store, worker } = await rig(
        gpu,
        capture,
        (target) =>
          new DamagingSource(gpu, target, 1, (g, f) => {
            const len = f.tensors.hidden_state.shape[0];
            g.release(f.tensors.hidden_state);
            return { ...f, tensors: { ...f.tensors, hidden_state: g.zeros([len, H + 1], 'f32') } };
          }),
      );
      const before = await counts(controller, store);
      const err = await assertRejects(() => worker.runOnce(8), /sample run:t1: aux hidden width 9 != 1 layers x 8/, 'shape mismatch');
      assert(err instanceof CaptureMismatchError, err.name);
      const after = await counts(controller, store);
      assertDeepEqual(
        [before.committed, after.committed, after.depth, after.resident],
        [0, 2, 2, 2],
        'the two good samples committed, queued and resident',
      );
      const status = await controller.status();
      assertDeepEqual(
        [status.promptsFailed, status.promptsLeased, status.promptsPending],
        [1, 0, 0],
        'the bad task is terminal, no lease stranded',
      );
      assertEqual((await controller.promptFailures())[0]?.reason.includes('aux hidden width 9'), true, 'the terminal failure records why');
      for (const id of ['run:t0', 'run:t2']) store.abort(id);
      assertEqual(gpu.pool.stats().liveBuffers, 0, 'the rejected capture was released');
      gpu.destroy();
    },
  );

  t.test(
    'samples whose dtypes disagree are refused as one batch naming both; they stay committed and unacked (a restart requeues them)',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const capture: CaptureConfig = {
        featureNames: ['input_ids', 'hidden_state', 'labels'],
        auxLayerIds: [],
        targetRepr: 'hidden_state',
        targetHiddenSize: H,
      };
      // Labels as f32 instead of i32: verifyCapture checks names and widths, not dtypes; the ref's
      // FeatureSpec records the dtype, and the loader refuses to collate it with i32 labels.
      const { controller, store, worker } = await rig(
        gpu,
        capture,
        (target) =>
          new DamagingSource(gpu, target, 1, (g, f) => {
            const labels = f.tensors.labels;
            const asFloat = g.zeros([...labels.shape], 'f32', 'labels');
            g.release(labels);
            return { ...f, tensors: { ...f.tensors, labels: asFloat } };
          }),
        2,
      );
      await worker.runOnce(8);
      const lease = await controller.trainLease();
      const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: 2, padValues: { labels: -1 } });
      const err = await assertRejects(
        async () => {
          for await (const b of loader) gpu.release(...Object.values(b.tensors));
        },
        /feature labels: sample run:t1 is float32\[\d+\], sample run:t0 is int32\[\d+\]/,
        'dtype mismatch',
      );
      assert(err instanceof HomogeneityError, err.name);
      const after = await counts(controller, store);
      assertDeepEqual(
        [after.committed, after.acked, after.inFlight, after.leases],
        [2, 0, 0, 0],
        'committed, unacked, no lease or store lease left',
      );
      assertDeepEqual(
        (await controller.queue.terminalFailures()).map((f) => f.sampleId).sort(),
        ['run:t0', 'run:t1'],
        'the batch is failed terminally (visible, not silently dropped)',
      );
      for (const id of ['run:t0', 'run:t1']) store.abort(id);
      assertEqual(gpu.pool.stats().liveBuffers, 0, 'no buffer leaked');
      gpu.destroy();
    },
  );

  t.test(
    'a corrupt or truncated feature shard: a clear error naming the file; no lease or buffer leaked; the file untouched; only its batch fails',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'bad-shards');
      try {
        const good = shard(5, 100);
        await tmp.files.writeAtomic('a_good.safetensors', good);
        await tmp.files.writeAtomic('b_truncated.safetensors', shard(5, 200).slice(0, good.length - 7));
        const corrupt = shard(5, 300);
        corrupt[9] ^= 0x7f; // inside the JSON header
        await tmp.files.writeAtomic('c_corrupt.safetensors', corrupt);
        const refs = await new OfflineManifestReader(tmp.files, '', { runId: 'off' }).read();
        const store = new LocalFeatureStore(gpu, { files: tmp.files });
        const buffers = gpu.pool.stats().liveBuffers;
        await assertRejects(() => store.get(refs[1]), /b_truncated\.safetensors: .*(past|short|end)/, 'truncated shard');
        await assertRejects(() => store.get(refs[2]), /c_corrupt\.safetensors/, 'corrupt shard');
        assertDeepEqual([store.health().activeLeases, gpu.pool.stats().liveBuffers], [0, buffers], 'no lease, no buffer');
        assertEqual((await tmp.files.read('c_corrupt.safetensors')).length, corrupt.length, 'a bad shard is never rewritten or deleted');

        // Queue mode: the good batch trains; the bad one is failed terminally; every ref stays committed.
        const controller = new DataFlowController({ runId: 'off', store: new InMemoryMetadataStore() });
        await controller.enqueueOfflineRefs(refs);
        const lease = await controller.trainLease();
        const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: 1, prefetch: false });
        const trained: string[] = [];
        await assertRejects(
          async () => {
            for await (const b of loader) {
              trained.push(...b.sampleIds);
              gpu.release(...Object.values(b.tensors));
            }
          },
          /b_truncated\.safetensors/,
          'loader surfaces the file',
        );
        assertDeepEqual(trained, ['off:00000000'], 'the good shard trained first');
        const s = await controller.status();
        assertDeepEqual(
          [s.samplesCommitted, s.queueInFlight, s.queueTerminal, s.queueDepth],
          [3, 1, 1, 1],
          'committed 3; good leased (awaiting its ack); bad terminal; corrupt still pending',
        );
        assertEqual(
          (await controller.queue.terminalFailures())[0].reason.includes('b_truncated.safetensors'),
          true,
          'the terminal failure names the file',
        );
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    FILES_ONLY,
  );

  t.test(
    'a damaged spill file: a clear error naming it, left in place; a healthy spill of another sample still serves',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'bad-spill');
      try {
        const store = new LocalFeatureStore(gpu, { storeId: 'sp', spill: tmp.files });
        const ok = await store.put({ input_ids: gpu.upload([3], 'i32', [1, 2, 3]) }, 'run:ok');
        const bad = await store.put({ input_ids: gpu.upload([3], 'i32', [4, 5, 6]) }, 'run:bad');
        const other = await store.put({ input_ids: gpu.upload([3], 'i32', [7, 8, 9]) }, 'run:other');
        // Lose the GPU copies (a restart), then damage two files: one cut short, one holding another sample.
        const restarted = new LocalFeatureStore(gpu, { storeId: 'sp', spill: tmp.files });
        const image = await tmp.files.read(spillPath('run:bad'));
        await tmp.files.writeAtomic(spillPath('run:bad'), image.slice(0, image.length - 4));
        await tmp.files.writeAtomic(spillPath('run:other'), await tmp.files.read(spillPath('run:ok')));
        const err = await assertRejects(
          () => restarted.get(bad),
          /get run:bad: the spill file .*run%3Abad\.safetensors of sample run:bad is damaged \(.*\); it is left in place/,
          'truncated spill',
        );
        assert(err instanceof FeatureSpillError, err.name);
        await assertRejects(
          () => restarted.get(other),
          /run%3Aother\.safetensors of sample run:other is damaged \(it holds sample "run:ok"\)/,
          'a file holding another sample',
        );
        assertEqual((await tmp.files.read(spillPath('run:bad'))).length, image.length - 4, 'damaged file kept for inspection');
        assertDeepEqual([restarted.health().residentSamples, restarted.health().activeLeases], [0, 0], 'nothing half-loaded');
        const got = await restarted.get(ok);
        assertDeepEqual([...(await gpu.read(got.tensors.input_ids))], [1, 2, 3], 'the healthy spill serves');
        restarted.release(got.handle);
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    FILES_ONLY,
  );

  t.test(
    'a bit flip in spilled tensor bytes is refused by the per-tensor CRC, naming the file and the tensor',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'bad-spill-bits');
      try {
        const store = new LocalFeatureStore(gpu, { storeId: 'sp', spill: tmp.files });
        const ref = await store.put(
          { input_ids: gpu.upload([3], 'i32', [1, 2, 3]), loss_mask: gpu.upload([3], 'i32', [0, 1, 1]) },
          'run:flip',
        );
        const restarted = new LocalFeatureStore(gpu, { storeId: 'sp', spill: tmp.files });
        const image = await tmp.files.read(spillPath('run:flip'));
        // The last bytes of the file are the last tensor's data: flip one bit of the loss mask.
        const flipped = image.slice();
        flipped[flipped.length - 4] ^= 1;
        await tmp.files.writeAtomic(spillPath('run:flip'), flipped);
        await assertRejects(
          () => restarted.get(ref),
          /run%3Aflip\.safetensors of sample run:flip is damaged \(tensor "loss_mask" has CRC-32 [0-9a-f]+, the file recorded [0-9a-f]+\)/,
          'flipped loss-mask bit',
        );
        assertDeepEqual([restarted.health().residentSamples, restarted.health().activeLeases], [0, 0], 'nothing loaded');
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    FILES_ONLY,
  );

  t.test(
    'an over-budget put with a spill: refused before any file is written; residency and caller tensors unchanged',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'bad-budget');
      try {
        const store = new LocalFeatureStore(gpu, { storeId: 'sp', spill: tmp.files, maxResidentBytes: 64 });
        await store.put({ input_ids: gpu.upload([8], 'i32', [0, 1, 2, 3, 4, 5, 6, 7]) }, 'run:first');
        const before = { ...store.health(), files: await tmp.files.list('') };
        const big = gpu.upload(
          [16],
          'f32',
          Array.from({ length: 16 }, (_, i) => i),
        );
        const err = await assertRejects(
          () => store.put({ hidden_state: big }, 'run:big'),
          /put run:big: 64 bytes would bring the store "sp" to 96 bytes, over its budget of 64/,
          'budget',
        );
        assert(err instanceof FeatureStoreBudgetError, err.name);
        const after = { ...store.health(), files: await tmp.files.list('') };
        assertDeepEqual(
          [after.residentSamples, after.residentBytes, after.files, after.spill?.writes],
          [before.residentSamples, before.residentBytes, before.files, before.spill?.writes],
          'residency and files unchanged',
        );
        assertEqual((await gpu.read(big))[15], 15, 'the caller still owns its tensor');
        gpu.release(big);
        await store.abort('run:first');
        assertDeepEqual(await tmp.files.list(''), [], 'abort removed the only file');
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    FILES_ONLY,
  );

  t.test('ack or fail of a sample id never committed: UnknownSampleError naming it; nothing recorded; leases kept', async () => {
    const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
    const worker = await controller.registerRolloutWorker({ workerId: 'w' });
    const trainer = await controller.registerTrainer({ trainerId: 'tr' });
    const refs: SampleRef[] = ['run:a', 'run:b'].map((sampleId) => ({
      sampleId,
      runId: 'run',
      sourceTaskId: null,
      featureStoreUri: `mem://x/${sampleId}?generation=1`,
      featureKeys: {},
      featureSpecs: {},
      strategy: 'eagle3',
      schemaVersion: 1,
      targetModelVersion: 'unknown',
      tokenizerVersion: 'unknown',
      draftWeightVersion: null,
      numTokens: 0,
      estimatedBytes: 0,
      metadata: {},
    }));
    await controller.commitSamples(worker, refs);
    await controller.leaseTrainRefs(trainer, 2);
    const before = await controller.status();
    const err = await assertRejects(
      () => controller.ackTrainRefs(trainer, ['run:a', 'run:ghost'], { globalStep: 1, optimizerDurable: true }),
      /ackTrainRefs: 1 sample id\(s\) were never committed in run run: "run:ghost"; nothing was acked/,
      'ack of an unknown id',
    );
    assert(err instanceof UnknownSampleError, err.name);
    await assertRejects(
      () => controller.failRefs(trainer, ['run:b', 'other-run:b'], 'bad batch', true),
      /failRefs: 1 sample id\(s\) were never committed in run run: "other-run:b"; nothing was failed/,
      'fail of an unknown id',
    );
    const after = await controller.status();
    assertDeepEqual(
      [after.durableAcked, after.durableGlobalStep, after.queueInFlight, after.queueDepth],
      [before.durableAcked, before.durableGlobalStep, 2, 0],
      'no ack recorded, both leases kept, nothing requeued',
    );
    assertEqual(
      (await controller.ackTrainRefs(trainer, ['run:a', 'run:b'], { globalStep: 1, optimizerDurable: true })).released,
      2,
      'a correct ack still goes through',
    );
  });

  t.test(
    'a stale ref (the sample was re-put): refused naming both generations; the current sample and its leases are untouched',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const store = new LocalFeatureStore(gpu, { storeId: 'st', clock: () => 0 });
      const old = await store.put({ input_ids: gpu.upload([2], 'i32', [1, 1]) }, 'run:x');
      const current = await store.put({ input_ids: gpu.upload([2], 'i32', [2, 2]) }, 'run:x');
      const held = await store.get(current);
      const before = store.health();
      const [g0, g1] = [old, current].map((r) => parseMemUri(r.featureStoreUri).generation);
      const err = await assertRejects(
        () => store.get(old),
        new RegExp(`stale ref for sample run:x: generation ${g0}, resident generation ${g1}`),
        'stale get',
      );
      assert(err instanceof FeatureNotFoundError, err.name);
      store.release({ sampleId: 'run:x', generation: g0, leaseToken: `run:x:${g0}:999` });
      assertDeepEqual(store.health(), before, 'a failed get and a stale release change nothing');
      assertDeepEqual([...(await gpu.read(held.tensors.input_ids))], [2, 2], 'the current generation is intact');
      store.release(held.handle);
      assertEqual(store.health().residentSamples, 0, 'consumed by its own lease');
      gpu.destroy();
    },
  );
});
