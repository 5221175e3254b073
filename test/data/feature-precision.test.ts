/**
 * f16 features through every store (docs: CaptureConfig.featurePrecision): the capture's cast and
 * its overflow refusal, the local store, the data-plane store (GPU and host columns), the spill
 * (F16 safetensors with its CRC, a damaged file refused), offline shards written F16 and read back
 * as f16, and the loader's collation (f16 padding, mixed precisions refused).
 */
import { DataFlowController } from '../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../src/control/metadata-store.ts';
import { makeSampleRef, type PromptTask } from '../../src/contracts/index.ts';
import { DataPlaneFeatureStore } from '../../src/data/dataplane-feature-store.ts';
import { f16BitsOf, FeatureDataLoader, HomogeneityError } from '../../src/data/feature-dataloader.ts';
import { spillPath } from '../../src/data/feature-spill.ts';
import { FeatureSpillError } from '../../src/data/feature-store.ts';
import { LocalFeatureStore } from '../../src/data/local-feature-store.ts';
import { offlineEagle3Transform, offlineShardBytes } from '../../src/data/offline-eagle3.ts';
import { fileUri } from '../../src/data/offline-manifest.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import { FeatureOverflowError, toFeaturePrecision, type CaptureConfig } from '../../src/inference/capture.ts';
import { RolloutWorker, type CapturedFeatures, type FeatureSource } from '../../src/inference/rollout-worker.ts';
import { castF32ToF16Ref } from '../../src/reference/cast.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from './temp-store.ts';

const L = 6;
const W = 8;

/** A captured sample: f32 hidden states (values up to ±4, some f16 subnormals) and i32 ids. */
function captured(gpu: Gpu, seed: number): { tensors: Record<string, Tensor>; hidden: Float32Array } {
  const hidden = new Rng(seed).floats(L * W, 4);
  hidden[1] = 3e-6; // an f16 subnormal
  return {
    tensors: {
      input_ids: gpu.upload(
        [L],
        'i32',
        Array.from({ length: L }, (_, i) => seed + i),
        'input_ids',
      ),
      hidden_state: gpu.upload([L, W], 'f32', hidden, 'hidden_state'),
    },
    hidden,
  };
}

async function bits(gpu: Gpu, t: Tensor): Promise<number[]> {
  assertEqual(t.dtype, 'f16', `${t.label} dtype`);
  return [...(await gpu.read(t))];
}

export default defineSuite('data/feature-precision', (t) => {
  t.test(
    'the capture cast: f32 features become f16 (ids untouched, originals freed); an overflow is refused naming feature and sample',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const { tensors, hidden } = captured(gpu, 1);
      const half = await toFeaturePrecision(gpu, tensors, 'f16', 'run:a');
      assertEqual(half.input_ids, tensors.input_ids, 'i32 feature passed through');
      assertDeepEqual(await bits(gpu, half.hidden_state), [...castF32ToF16Ref(hidden).bits], 'hidden_state bits');
      const same = await toFeaturePrecision(gpu, half, 'f32', 'run:a');
      assertEqual(same.hidden_state, half.hidden_state, 'f32 precision keeps the tensors as they are');
      gpu.release(...Object.values(half));

      const bad = captured(gpu, 2);
      gpu.write(
        bad.tensors.hidden_state,
        Float32Array.from(bad.hidden, (x, i) => (i === 5 ? 70000 : i === 9 ? Number.NaN : x)),
      );
      const err = await assertRejects(
        () => toFeaturePrecision(gpu, bad.tensors, 'f16', 'run:b'),
        /^sample run:b: feature "hidden_state" has 2 values outside the f16 range \(\|x\| > 65504, inf or NaN\); refusing to store it as f16/,
        'overflow',
      );
      assert(err instanceof FeatureOverflowError, err.name);
      assertEqual((await gpu.read(bad.tensors.hidden_state)).length, L * W, 'the caller still owns the f32 tensors');
      gpu.release(...Object.values(bad.tensors));
      assertEqual(gpu.pool.stats().liveBuffers, 0, 'no buffer leaked');
      gpu.destroy();
    },
  );

  t.test(
    'a rollout worker with f16 precision stores f16 and fails an overflowing task terminally, committing the rest',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const capture: CaptureConfig = {
        featureNames: ['input_ids', 'hidden_state'],
        auxLayerIds: [],
        targetRepr: 'hidden_state',
        targetHiddenSize: W,
        featurePrecision: 'f16',
      };
      const source: FeatureSource = {
        generateFeatures: async (tasks: readonly PromptTask[]): Promise<CapturedFeatures[]> =>
          tasks.map((task, i) => {
            const c = captured(gpu, i + 1);
            if (task.taskId === 't1')
              gpu.write(
                c.tensors.hidden_state,
                c.hidden.map((x, j) => (j === 0 ? -1e6 : x)),
              );
            return { tensors: c.tensors };
          }),
      };
      const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
      const store = new LocalFeatureStore(gpu);
      const worker = await RolloutWorker.create(controller, source, store, gpu, capture, { workerId: 'w' });
      await controller.ingestPrompts(['t0', 't1', 't2'].map((taskId) => ({ taskId, payload: {}, maxLength: 8 })));
      await assertRejects(
        () => worker.runOnce(3),
        /sample run:t1: feature "hidden_state" has 1 value outside the f16 range/,
        'the first refusal is rethrown',
      );
      assertEqual((await controller.promptFailures()).length, 1, 'one task failed');
      assert(/outside the f16 range/.test((await controller.promptFailures())[0].reason), 'the failure names the overflow');
      const refs = await (await controller.trainLease()).get(8, 0);
      assertDeepEqual(refs.map((r) => r.sampleId).sort(), ['run:t0', 'run:t2'], 'the good tasks are committed');
      assertEqual(refs[0].featureSpecs.hidden_state.dtype, 'float16', 'spec dtype');
      assertEqual(refs[0].estimatedBytes, L * 4 + L * W * 2, 'bytes: i32 ids + f16 hidden');
      const got = await store.get(refs[0]);
      assertEqual(got.tensors.hidden_state.dtype, 'f16', 'stored as f16');
      store.release(got.handle);
      store.abort('run:t2');
      assertEqual(gpu.pool.stats().liveBuffers, 0, 'the refused sample freed, no buffer leaked');
      gpu.destroy();
    },
  );

  for (const columns of ['gpu', 'host'] as const) {
    t.test(`the data-plane store (${columns} columns) carries f16 features bit for bit`, async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const client = await createDataPlaneClient({ impl: 'transferQueue', backend: { kind: 'local', columns }, claimPollMs: 5 }, { gpu });
      const store = await DataPlaneFeatureStore.open(gpu, client, 'features', { input_ids: 'i32', hidden_state: 'f16' });
      const { tensors, hidden } = captured(gpu, 3);
      const ref = await store.put(await toFeaturePrecision(gpu, tensors, 'f16', 's'), 's');
      assertEqual(ref.featureSpecs.hidden_state.dtype, 'float16', 'spec dtype');
      const got = await store.get(ref);
      assertDeepEqual(await bits(gpu, got.tensors.hidden_state), [...castF32ToF16Ref(hidden).bits], 'bits back');
      store.release(got.handle);
      await store.drain();
      await client.close();
      gpu.destroy();
    });
  }

  t.test(
    'the spill writes F16 with its CRC, re-materialises f16 bit for bit, and refuses a damaged f16 file',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'f16-spill');
      try {
        const store = new LocalFeatureStore(gpu, { storeId: 'sp', spill: tmp.files });
        const { tensors, hidden } = captured(gpu, 4);
        const ref = await store.put(await toFeaturePrecision(gpu, tensors, 'f16', 'run:a'), 'run:a');
        const file = new SafetensorsFile(await tmp.files.read(spillPath('run:a')));
        assertEqual(file.entry('hidden_state').dtype, 'F16', 'spilled as F16');
        assertEqual(file.raw('hidden_state').byteLength, L * W * 2, 'two bytes per value on disk');
        const want = [...castF32ToF16Ref(hidden).bits];
        const first = await store.get(ref);
        store.release(first.handle); // consumed: the next get reads the file
        const again = await store.get(ref);
        assertDeepEqual(await bits(gpu, again.tensors.hidden_state), want, 're-materialised f16 bits');
        store.release(again.handle);
        // One flipped bit in the f16 payload: every structural check passes, the CRC does not.
        const image = await tmp.files.read(spillPath('run:a'));
        const damaged = image.slice();
        damaged[image.byteLength - 3] ^= 0x10;
        await tmp.files.writeAtomic(spillPath('run:a'), damaged);
        const err = await assertRejects(
          () => store.get(ref),
          /spill file .* of sample run:a is damaged \(tensor "hidden_state" has CRC-32 [0-9a-f]+, the file recorded [0-9a-f]+\)/,
          'damaged f16 spill',
        );
        assert(err instanceof FeatureSpillError, err.name);
        await store.abort('run:a');
        assertEqual(gpu.pool.stats().liveBuffers, 0, 'no buffer leaked');
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
  );

  t.test('offline shards written F16 are read back as f16 bit for bit and normalised as f16', async ({ gpu: ctx, platform }) => {
    const gpu = new Gpu(ctx);
    const tmp = tempStore(platform, 'f16-shards');
    try {
      const S = 5;
      const H = 4;
      const rng = new Rng(7);
      const hidden = castF32ToF16Ref(rng.floats(S * H, 2)).bits;
      const aux = castF32ToF16Ref(rng.floats(S * 3 * H, 2)).bits;
      const sample = { inputIds: Int32Array.from([1, 2, 3, 4, 5]), lossMask: Int32Array.from([0, 1, 1, 1, 1]), hidden, aux };
      await tmp.files.writeAtomic('shards/00000000.safetensors', offlineShardBytes(sample, H, 0));
      const file = new SafetensorsFile(await tmp.files.read('shards/00000000.safetensors'));
      assertDeepEqual([file.entry('hidden_state').dtype, file.entry('aux_hidden_state').dtype], ['F16', 'F16'], 'F16 on disk');
      const keys = { input_ids: 'input_ids', loss_mask: 'loss_mask', hidden_state: 'hidden_state', aux_hidden_state: 'aux_hidden_state' };
      const ref = makeSampleRef({
        sampleId: 'offline:0',
        runId: 'offline',
        sourceTaskId: null,
        featureStoreUri: fileUri(tmp.files, 'shards/00000000.safetensors'),
        featureKeys: keys,
        featureSpecs: {},
        strategy: 'eagle3',
        targetModelVersion: 'x',
        tokenizerVersion: 'x',
        metadata: { target_repr: 'hidden_state' },
      });
      const store = new LocalFeatureStore(gpu, { files: tmp.files });
      const got = await store.get(ref);
      assertDeepEqual(await bits(gpu, got.tensors.hidden_state), [...hidden], 'hidden_state bits');
      assertDeepEqual(await bits(gpu, got.tensors.aux_hidden_state), [...aux], 'aux_hidden_state bits');
      const norm = offlineEagle3Transform(gpu, H, 3 * H)(got.tensors, ref);
      assertDeepEqual(await bits(gpu, norm.target), [...hidden.slice(H), 0, 0, 0, 0], 'target = hidden_state shifted left, in f16');
      assertEqual(norm.hidden_state, got.tensors.aux_hidden_state, 'draft input = the f16 aux hidden state');
      gpu.release(norm.target, norm.input_ids, norm.loss_mask);
      store.release(got.handle);
      assertEqual(gpu.pool.stats().liveBuffers, 0, 'no buffer leaked');
    } finally {
      gpu.destroy();
      await tmp.cleanup();
    }
  });

  t.test('the loader collates f16 features with f16 padding and refuses a batch mixing f16 and f32', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const store = new LocalFeatureStore(gpu);
    const short = { input_ids: gpu.upload([2], 'i32', [1, 2]), hidden_state: gpu.upload([2, 2], 'f16', [0x3c00, 0x4000, 0x4200, 0x4400]) };
    const long = {
      input_ids: gpu.upload([3], 'i32', [3, 4, 5]),
      hidden_state: gpu.upload([3, 2], 'f16', [0x4500, 0x4600, 0x4700, 0x4800, 0x4880, 0x4900]),
    };
    const refs = [await store.put(short, 'a'), await store.put(long, 'b')];
    const loader = new FeatureDataLoader(gpu, store, { refs }, { batchSize: 2, padValues: { hidden_state: -1 } });
    for await (const batch of loader) {
      assertEqual(batch.tensors.hidden_state.dtype, 'f16', 'collated as f16');
      assertDeepEqual(
        [...(await gpu.read(batch.tensors.hidden_state))],
        [0x3c00, 0x4000, 0x4200, 0x4400, 0xbc00, 0xbc00, 0x4500, 0x4600, 0x4700, 0x4800, 0x4880, 0x4900],
        'right-padded with f16 -1',
      );
      gpu.release(...Object.values(batch.tensors));
    }
    assertEqual(f16BitsOf(2 ** -24, 'pad'), 1, 'subnormal pad');
    assertThrows(
      () => f16BitsOf(0.1, 'padValues.hidden_state'),
      /padValues.hidden_state = 0.1 is not exactly an f16 value/,
      'inexact pad refused',
    );

    const mixed = [
      await store.put({ hidden_state: gpu.upload([1, 2], 'f16', [0, 0]) }, 'c'),
      await store.put({ hidden_state: gpu.upload([1, 2], 'f32', [0, 0]) }, 'd'),
    ];
    const bad = new FeatureDataLoader(gpu, store, { refs: mixed }, { batchSize: 2 });
    const err = await assertRejects(
      async () => {
        for await (const b of bad) gpu.release(...Object.values(b.tensors));
      },
      /feature hidden_state: sample d is float32\[1, 2\], sample c is float16\[1, 2\]/,
      'mixed precisions',
    );
    assert(err instanceof HomogeneityError, err.name);
    store.abort('c');
    store.abort('d');
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'no buffer leaked');
    gpu.destroy();
  });
});
