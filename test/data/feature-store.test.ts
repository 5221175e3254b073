import { assertNoTensors } from '../../src/contracts/index.ts';
import { FeatureNotFoundError, FeatureStoreBudgetError, GenerationClock, parseMemUri } from '../../src/data/feature-store.ts';
import { LocalFeatureStore } from '../../src/data/local-feature-store.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

function sample(gpu: Gpu, seed: number, tokens = 5, hidden = 3) {
  return {
    input_ids: gpu.upload(
      [tokens],
      'i32',
      Array.from({ length: tokens }, (_, i) => seed * 100 + i),
    ),
    hidden_state: gpu.upload(
      [tokens, hidden],
      'f32',
      Array.from({ length: tokens * hidden }, (_, i) => seed + i / 10),
    ),
  };
}

export default defineSuite('data/feature-store', (t) => {
  t.test('put returns a tensor-free ref with specs, generation and byte count', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const store = new LocalFeatureStore(gpu, { storeId: 'st' });
    const ref = await store.put(sample(gpu, 1), 'run:a', { runId: 'run', targetRepr: 'hidden_state', numTokens: 5 });
    assertNoTensors(ref, 'ref');
    assertEqual(ref.estimatedBytes, 5 * 4 + 15 * 4, 'bytes');
    assertDeepEqual(ref.featureSpecs.hidden_state.shape, [5, 3], 'spec shape');
    assertEqual(ref.featureSpecs.hidden_state.dtype, 'float32', 'spec dtype');
    assertEqual(parseMemUri(ref.featureStoreUri).sampleId, 'run:a', 'uri id');
    assert(Object.isFrozen(ref), 'ref frozen');
    gpu.destroy();
  });

  t.test('get returns the tensors and a lease; the last release frees (consume-once)', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const store = new LocalFeatureStore(gpu);
    const ref = await store.put(sample(gpu, 2), 's');
    const a = await store.get(ref);
    const b = await store.get(ref, ['input_ids']);
    assertDeepEqual([...(await gpu.read(a.tensors.input_ids))], [200, 201, 202, 203, 204], 'ids');
    store.release(a.handle);
    assertEqual(store.health().residentSamples, 1, 'kept while another lease is active');
    store.release(b.handle);
    store.release(b.handle);
    assertEqual(store.health().residentSamples, 0, 'freed on the last lease, release idempotent');
    await assertRejects(() => store.get(ref), /not resident/, 'consumed sample');
    gpu.destroy();
  });

  t.test('over-budget put is atomic and names the sample', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const store = new LocalFeatureStore(gpu, { maxResidentBytes: 100, clock: () => 0 });
    await store.put(sample(gpu, 1), 'first');
    const before = store.health();
    const second = sample(gpu, 2);
    const err = await assertRejects(() => store.put(second, 'second'), /put second: .* over its budget of 100/, 'budget');
    assert(err instanceof FeatureStoreBudgetError, err.name);
    assertDeepEqual(store.health(), before, 'residency unchanged');
    gpu.release(...Object.values(second));
    gpu.destroy();
  });

  t.test('re-put bumps the generation; the old ref is stale; leased old buffers are not leaked or reused', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const store = new LocalFeatureStore(gpu);
    const old = await store.put(sample(gpu, 1), 'x');
    const held = await store.get(old);
    const fresh = await store.put(sample(gpu, 2), 'x');
    assert(parseMemUri(fresh.featureStoreUri).generation > parseMemUri(old.featureStoreUri).generation, 'generation grows');
    await assertRejects(() => store.get(old), /stale ref/, 'stale ref after re-put');
    assertEqual(store.health().pendingFrees, 1, 'old generation parked while leased');
    // The parked buffers still hold the old values for their reader.
    assertDeepEqual([...(await gpu.read(held.tensors.input_ids))], [100, 101, 102, 103, 104], 'old reader intact');
    store.release(held.handle);
    assertEqual(store.health().pendingFrees, 0, 'freed at the last old lease');
    const got = await store.get(fresh);
    assertDeepEqual([...(await gpu.read(got.tensors.input_ids))], [200, 201, 202, 203, 204], 'new generation');
    store.release(got.handle);
    gpu.destroy();
  });

  t.test('abort evicts for new readers but keeps buffers for a current reader', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const store = new LocalFeatureStore(gpu);
    const ref = await store.put(sample(gpu, 3), 'y');
    const held = await store.get(ref);
    store.abort('y');
    store.abort('y');
    await assertRejects(() => store.get(ref), /not resident/, 'aborted');
    const liveBefore = gpu.pool.stats().liveBuffers;
    assertDeepEqual([...(await gpu.read(held.tensors.input_ids))], [300, 301, 302, 303, 304], 'reader still valid');
    store.release(held.handle);
    assertEqual(gpu.pool.stats().liveBuffers, liveBefore - 2, 'buffers returned after the last reader');
    gpu.destroy();
  });

  t.test('unknown feature name and foreign store are clear errors', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const store = new LocalFeatureStore(gpu, { storeId: 'one' });
    const other = new LocalFeatureStore(gpu, { storeId: 'two' });
    const ref = await store.put(sample(gpu, 4), 'z');
    await assertRejects(() => store.get(ref, ['target']), /no feature "target"/, 'missing feature');
    const err = await assertRejects(() => other.get(ref), /lives in store "one"/, 'foreign store');
    assert(err instanceof FeatureNotFoundError, err.name);
    assertEqual(store.health().activeLeases, 0, 'a failed get leaves no lease');
    gpu.destroy();
  });

  t.test('gc force-frees abandoned samples and spares leased ones', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    let now = 0;
    const store = new LocalFeatureStore(gpu, { maxHoldAgeMs: 1000, clock: () => now });
    await store.put(sample(gpu, 1), 'abandoned');
    const leasedRef = await store.put(sample(gpu, 2), 'leased');
    const held = await store.get(leasedRef);
    now = 5000;
    assertEqual(store.gc().forceFreed, 1, 'one force-freed');
    assertEqual(store.health().residentSamples, 1, 'leased sample spared');
    assertEqual(store.health().forceFreedTotal, 1, 'counter');
    store.release(held.handle);
    gpu.destroy();
  });

  t.test('bounded memory over 300 put → get → release cycles with clone-on-get', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const store = new LocalFeatureStore(gpu, { cloneOnGet: true });
    for (let i = 0; i < 300; i++) {
      const ref = await store.put(sample(gpu, i % 7), `s${i}`);
      const { tensors, handle } = await store.get(ref);
      store.release(handle);
      if (i % 50 === 0) assertEqual((await gpu.read(tensors.input_ids))[0], (i % 7) * 100, 'clone content');
      gpu.release(...Object.values(tensors));
    }
    await gpu.sync();
    const stats = gpu.pool.stats();
    assertEqual(store.health().residentBytes, 0, 'nothing resident');
    assert(stats.liveBuffers === 0 && stats.misses < 20, `pool reuses buffers: ${JSON.stringify(stats)}`);
    gpu.destroy();
  });

  t.test("generations come from the store's clock; stores given one clock never reuse a generation", async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const generationOf = (uri: string) => parseMemUri(uri).generation;
    const own = new LocalFeatureStore(gpu, { storeId: 'own' });
    assertEqual(generationOf((await own.put(sample(gpu, 1), 'x')).featureStoreUri), 1, 'a store alone starts its own sequence');
    const clock = new GenerationClock();
    const a = new LocalFeatureStore(gpu, { storeId: 'shared', generations: clock });
    const b = new LocalFeatureStore(gpu, { storeId: 'shared', generations: clock });
    const fromA = await a.put(sample(gpu, 2), 'x');
    const fromB = await b.put(sample(gpu, 3), 'x');
    assert(generationOf(fromB.featureStoreUri) > generationOf(fromA.featureStoreUri), 'the second store outranks the first');
    await assertRejects(() => b.get(fromA), /stale ref for sample x/, 'a ref of the other store is stale here');
    for (const s of [own, a, b]) s.abort('x');
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'no buffer leaked');
    gpu.destroy();
  });
});
