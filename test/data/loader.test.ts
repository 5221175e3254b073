import { makeTrainBatch } from '../../src/contracts/index.ts';
import { DataFlowController } from '../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../src/control/metadata-store.ts';
import { LocalFeatureStore } from '../../src/data/local-feature-store.ts';
import { epochOrder, FeatureDataLoader } from '../../src/data/feature-dataloader.ts';
import { OfflineManifestReader } from '../../src/data/offline-manifest.ts';
import { writeSafetensors } from '../../src/formats/safetensors-writer.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import type { FileStore } from '../../src/ports/storage.ts';
import type { Platform } from '../../src/cli/platform.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const H = 3;
const LENGTHS = [4, 6, 3, 5, 2];

function shard(i: number, len: number): Uint8Array {
  const ids = Int32Array.from({ length: len }, (_, t) => i * 10 + t);
  const mask = Int32Array.from({ length: len }, (_, t) => (t > 0 ? 1 : 0));
  const hidden = Float32Array.from({ length: len * H }, (_, k) => i + k / 100);
  const aux = Float32Array.from({ length: len * 3 * H }, (_, k) => -i - k / 100);
  const bytes = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  return writeSafetensors({
    input_ids: { dtype: 'I32', shape: [len], data: bytes(ids) },
    loss_mask: { dtype: 'I32', shape: [len], data: bytes(mask) },
    hidden_state: { dtype: 'F32', shape: [len, H], data: bytes(hidden) },
    aux_hidden_state: { dtype: 'F32', shape: [len, 3 * H], data: bytes(aux) },
  });
}

async function writeManifest(platform: Platform, name: string): Promise<FileStore> {
  const files = platform.files(`.speclab/test-tmp/${name}-${Date.now()}`);
  // Two sub-folders, written out of order: listing must sort.
  for (const i of [3, 0, 4, 1, 2]) await files.writeAtomic(`rows_${i < 2 ? 0 : 2}/data_${i}.safetensors`, shard(i, LENGTHS[i]));
  return files;
}

async function host(gpu: Gpu, t: Tensor): Promise<number[]> {
  return [...(await gpu.read(t))];
}

export default defineSuite('data/loader', (t) => {
  t.test('offline reader lists shards lazily in sorted order with deterministic ids', async ({ platform }) => {
    const files = await writeManifest(platform, 'list');
    const refs = await new OfflineManifestReader(files, '', { runId: 'off', tttLength: 3 }).read();
    assertDeepEqual(
      refs.map((r) => r.sampleId),
      ['off:00000000', 'off:00000001', 'off:00000002', 'off:00000003', 'off:00000004'],
      'ids',
    );
    assert(
      refs[0].featureStoreUri.endsWith('rows_0/data_0.safetensors') && refs[4].featureStoreUri.endsWith('rows_2/data_4.safetensors'),
      'sorted paths',
    );
    assertEqual(refs[2].metadata.ttt_length, 3, 'metadata');
    await files.remove('');
  });

  t.test('refs mode: padded batches on the GPU, drop_last, identical across epochs', async ({ gpu: ctx, platform }) => {
    const gpu = new Gpu(ctx);
    const files = await writeManifest(platform, 'pad');
    const refs = await new OfflineManifestReader(files).read();
    const store = new LocalFeatureStore(gpu, { files });
    const loader = new FeatureDataLoader(gpu, store, { refs }, { batchSize: 2 });
    const seen: string[][] = [];
    for (const epoch of [0, 1]) {
      loader.setEpoch(epoch);
      const ids: string[] = [];
      for await (const batch of loader) {
        ids.push(...batch.sampleIds);
        const lens = batch.sampleIds.map((id) => LENGTHS[Number(id.split(':')[1])]);
        const maxLen = Math.max(...lens);
        assertDeepEqual(batch.tensors.aux_hidden_state.shape, [2, maxLen, 3 * H], 'aux shape');
        assertDeepEqual(batch.tensors.input_ids.shape, [2, maxLen], 'ids shape');
        const gotIds = await host(gpu, batch.tensors.input_ids);
        const gotMask = await host(gpu, batch.tensors.attention_mask);
        batch.sampleIds.forEach((id, b) => {
          const i = Number(id.split(':')[1]);
          for (let p = 0; p < maxLen; p++) {
            assertEqual(gotIds[b * maxLen + p], p < LENGTHS[i] ? i * 10 + p : 0, `ids[${b},${p}] (right-padded with 0)`);
            assertEqual(gotMask[b * maxLen + p], p < LENGTHS[i] ? 1 : 0, `attention_mask[${b},${p}]`);
          }
        });
        const hidden = await host(gpu, batch.tensors.hidden_state);
        const i1 = Number(batch.sampleIds[1].split(':')[1]);
        assert(Math.abs(hidden[maxLen * H + 1] - (i1 + 0.01)) < 1e-6, 'hidden row of the second sample');
        gpu.release(...Object.values(batch.tensors));
      }
      seen.push(ids);
    }
    assertEqual(seen[0].length, 4, 'drop_last drops the fifth sample');
    assertDeepEqual(seen[0], seen[1], 'unshuffled epochs are identical');
    assertEqual(store.health().activeLeases, 0, 'every file lease released');
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'no GPU buffer leaked');
    await files.remove('');
    gpu.destroy();
  });

  t.test('epoch order: seeded shuffle and disjoint rank shards covering every index', () => {
    const a = epochOrder(10, 0, { shuffle: true, seed: 7 });
    const b = epochOrder(10, 1, { shuffle: true, seed: 7 });
    assertDeepEqual(epochOrder(10, 0, { shuffle: true, seed: 7 }), a, 'deterministic');
    assert(a.join() !== b.join(), 'differs across epochs');
    assertDeepEqual(
      [...a].sort((x, y) => x - y),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
      'a permutation',
    );
    const r0 = epochOrder(5, 0, { rank: 0, worldSize: 2 });
    const r1 = epochOrder(5, 0, { rank: 1, worldSize: 2 });
    assertDeepEqual(r0, [0, 2, 4], 'rank 0');
    assertDeepEqual(r1, [1, 3, 0], 'rank 1 (wrapped padding)');
  });

  t.test('a shard missing a key fails on first access, naming the file', async ({ gpu: ctx, platform }) => {
    const gpu = new Gpu(ctx);
    const files = platform.files(`.speclab/test-tmp/bad-${Date.now()}`);
    const good = shard(0, 3);
    await files.writeAtomic('a.safetensors', writeSafetensors({ input_ids: { dtype: 'I32', shape: [1], data: new Uint8Array(4) } }));
    await files.writeAtomic('b.safetensors', good.slice(0, good.length - 10));
    const refs = await new OfflineManifestReader(files).read();
    const store = new LocalFeatureStore(gpu, { files });
    await assertRejects(() => store.get(refs[0]), /a\.safetensors .* has no tensor "loss_mask"/, 'missing key');
    await assertRejects(() => store.get(refs[1]), /b\.safetensors/, 'truncated shard');
    assertEqual(store.health().activeLeases, 0, 'no lease left behind');
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'partial uploads released');
    await files.remove('');
    gpu.destroy();
  });

  t.test('queue mode through TrainLease: no acks by the loader, short tail settled, mixed batches rejected', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
    const worker = await controller.registerRolloutWorker({ workerId: 'w0' });
    const store = new LocalFeatureStore(gpu);
    const refs = await Promise.all(
      [0, 1, 2, 3, 4].map((i) =>
        store.put(
          {
            input_ids: gpu.upload(
              [LENGTHS[i]],
              'i32',
              Array.from({ length: LENGTHS[i] }, (_, p) => i * 10 + p),
            ),
          },
          `run:t${i}`,
          { runId: 'run', targetRepr: i === 4 ? 'hidden_state' : 'logits' },
        ),
      ),
    );
    await controller.commitSamples(worker, refs.slice(0, 4));
    const lease = await controller.trainLease();
    const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: 3 });
    const batches: string[][] = [];
    for await (const batch of loader) {
      batches.push(batch.sampleIds);
      gpu.release(...Object.values(batch.tensors));
    }
    assertDeepEqual(batches, [['run:t0', 'run:t1', 'run:t2']], 'one full batch; the short tail is dropped');
    let status = await controller.status();
    assertEqual(status.queueInFlight, 3, 'the trained batch stays leased until the trainer acks');
    assertEqual(status.queueTerminal, 1, 'the tail was failed terminally');
    assertEqual(store.health().residentSamples, 1, 'consumed (t0-t2) and aborted (t3) samples are gone; only uncommitted t4 remains');
    await lease.ack(
      batches[0].map((id) => refs[Number(id.slice(5))]),
      { globalStep: 1, optimizerDurable: true },
    );
    status = await controller.status();
    assertEqual(status.queueInFlight, 0, 'acked');

    // A batch mixing target representations is refused, failed terminally, and its leases released.
    const extra = await Promise.all(
      [5, 6].map((i) => store.put({ input_ids: gpu.upload([2], 'i32', [i, i]) }, `run:t${i}`, { runId: 'run', targetRepr: 'logits' })),
    );
    await controller.commitSamples(worker, [refs[4], extra[0]]);
    const mixed = new FeatureDataLoader(gpu, store, { lease }, { batchSize: 2 });
    await assertRejects(
      async () => {
        for await (const b of mixed) gpu.release(...Object.values(b.tensors));
      },
      /mixes target representations/,
      'mixed target_repr',
    );
    status = await controller.status();
    assertEqual(status.queueInFlight, 0, 'mixed batch released');
    store.abort('run:t4');
    store.abort('run:t5');
    store.abort('run:t6');
    gpu.destroy();
  });

  t.test('every batch carries the refs it was collated from, in sample order', async ({ gpu: ctx, platform }) => {
    const gpu = new Gpu(ctx);
    const files = await writeManifest(platform, 'refs');
    const refs = await new OfflineManifestReader(files).read();
    const store = new LocalFeatureStore(gpu, { files });
    const loader = new FeatureDataLoader(gpu, store, { refs }, { batchSize: 2, shuffle: true, seed: 7 });
    let batches = 0;
    for await (const batch of loader) {
      assertDeepEqual(
        batch.refs.map((r) => r.sampleId),
        batch.sampleIds,
        'refs follow sampleIds',
      );
      assert(
        batch.refs.every((r) => refs.includes(r)),
        'the refs are the ones the loader was given',
      );
      gpu.release(...Object.values(batch.tensors));
      batches++;
    }
    assertEqual(batches, 2, 'two full batches');
    const hidden = gpu.tensor([1, 2, H], 'f32');
    assertDeepEqual(
      makeTrainBatch({ sampleIds: ['a'], strategy: 'eagle3', tensors: { hidden } }).refs,
      [],
      'a hand-built batch has no refs',
    );
    assertThrows(
      () => makeTrainBatch({ sampleIds: ['a', 'b'], strategy: 'eagle3', tensors: { hidden }, refs: [refs[0], refs[1]] }),
      /TrainBatch\.refs: refs \[.*\] do not match sampleIds \[a,b\]/,
      'mismatched refs',
    );
    gpu.release(hidden);
    await files.remove('');
    gpu.destroy();
  });
});
