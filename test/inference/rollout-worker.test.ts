import { DataFlowController } from '../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../src/control/metadata-store.ts';
import { LocalFeatureStore } from '../../src/data/local-feature-store.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { CaptureMismatchError, verifyCapture, type CaptureConfig } from '../../src/inference/capture.ts';
import { RolloutWorker } from '../../src/inference/rollout-worker.ts';
import { assert, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { bigramPrompts, ToyEmbeddingTarget } from './toy-target.ts';

const CAPTURE: CaptureConfig = {
  featureNames: ['input_ids', 'hidden_state', 'labels'],
  auxLayerIds: [],
  targetRepr: 'hidden_state',
  targetHiddenSize: 8,
};

async function setup(gpu: Gpu, prompts = 2, options: { maxResidentBytes?: number } = {}) {
  const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
  const store = new LocalFeatureStore(gpu, options);
  const target = new ToyEmbeddingTarget(gpu, 16, 8);
  const worker = await RolloutWorker.create(controller, target, store, gpu, CAPTURE, { workerId: 'w0' });
  await controller.ingestPrompts(bigramPrompts(prompts, 16).map((p, i) => ({ taskId: `t${i}`, payload: p, maxLength: 64 })));
  return { controller, store, target, worker };
}

export default defineSuite('inference/rollout-worker', (t) => {
  t.test('capture checks: ok, layer mismatch, missing feature, aux width, target dim, pruned needs a vocab map', ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const aux = gpu.tensor([4, 24], 'f32');
    const target = gpu.tensor([4, 100], 'f32');
    const cap: CaptureConfig = {
      featureNames: ['hidden_state', 'target'],
      auxLayerIds: [10, 15, 20],
      targetRepr: 'logits',
      targetHiddenSize: 8,
      targetVocabSize: 100,
    };
    verifyCapture({ hidden_state: aux, target }, cap, { sampleId: 's', recordedAuxLayerIds: [10, 15, 20] });
    assertThrows(
      () => verifyCapture({ hidden_state: aux, target }, cap, { sampleId: 's', recordedAuxLayerIds: [10, 15, 21] }),
      /sample s: aux layers captured \[10,15,21\]/,
      'layers',
    );
    assertThrows(() => verifyCapture({ hidden_state: aux }, cap, { sampleId: 's' }), /feature "target" missing/, 'missing');
    assertThrows(
      () => verifyCapture({ hidden_state: aux, target }, { ...cap, targetHiddenSize: 9 }, { sampleId: 's' }),
      /aux hidden width 24/,
      'width',
    );
    assertThrows(
      () => verifyCapture({ hidden_state: aux, target }, { ...cap, targetVocabSize: 101 }, { sampleId: 's' }),
      /last dim 100 != expected 101/,
      'logits expect V',
    );
    const pruned = { ...cap, targetRepr: 'pruned_logits' as const, draftVocabSize: 100 };
    const err = assertThrows(() => verifyCapture({ hidden_state: aux, target }, pruned, { sampleId: 's' }), /vocabMapVersion/, 'pruned');
    assert(err instanceof CaptureMismatchError, err.name);
    gpu.destroy();
  });

  t.test('runOnce commits one ref per task; features are retrievable; no tasks → []', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const { controller, store, worker } = await setup(gpu);
    const refs = await worker.runOnce(8);
    assertEqual(refs.length, 2, 'refs');
    assertEqual(refs[0].sampleId, 'run:t0', 'deterministic id');
    const s = await controller.status();
    assertEqual(s.queueDepth, 2, 'queue depth');
    assertEqual(s.promptsLeased, 0, 'leases cleared by the commit');
    const { tensors, handle } = await store.get(refs[1]);
    assertEqual(tensors.hidden_state.shape[1], 8, 'hidden width');
    store.release(handle);
    assertEqual((await worker.runOnce(8)).length, 0, 'nothing left');
    gpu.destroy();
  });

  t.test('a feature-source failure requeues the prompts for another worker (attempt 1)', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const { controller, store, target, worker } = await setup(gpu);
    target.failNext = true;
    await assertRejects(() => worker.runOnce(8), /toy target crashed/, 'rethrown');
    assertEqual(worker.state, 'unhealthy', 'state');
    const other = await RolloutWorker.create(controller, target, store, gpu, CAPTURE, { workerId: 'w1' });
    const refs = await other.runOnce(8);
    assertEqual(refs.length, 2, 'another worker leased and committed them');
    assertEqual((await controller.promptTask('t0'))?.attempt ?? -1, -1, 'completed tasks are retired');
    for (const r of refs) store.abort(r.sampleId);
    gpu.destroy();
  });

  t.test('a wrong result count fails every task terminally', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const { controller, target, worker } = await setup(gpu);
    target.dropOne = true;
    await assertRejects(() => worker.runOnce(8), /returned 1 results for 2 tasks/, 'count mismatch');
    const s = await controller.status();
    assertEqual(s.promptsFailed, 2, 'both terminal');
    assertEqual(s.samplesCommitted, 0, 'nothing committed');
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'returned tensors released');
    gpu.destroy();
  });

  t.test('a capture mismatch fails only that task; the good one is committed first', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const { controller, target, worker, store } = await setup(gpu);
    const capture = { ...CAPTURE, auxLayerIds: [5] };
    const w = await RolloutWorker.create(controller, target, store, gpu, capture, { workerId: 'w2' });
    target.wrongLayersFor = 1;
    // The toy target records the requested layer ids, except for task 1 (shifted by one).
    await assertRejects(
      () => w.runOnce(8),
      /sample run:t1: aux layers captured \[6\] differ from the requested \[5\]/,
      'mismatch raised after commit',
    );
    const s = await controller.status();
    assertEqual(s.samplesCommitted, 1, 'good sample committed');
    assertEqual(s.promptsFailed, 1, 'bad one terminal');
    assertEqual(s.promptsLeased, 0, 'no stranded lease');
    void worker;
    store.abort('run:t0');
    gpu.destroy();
  });

  t.test('a failed put aborts the sample and requeues the task (retryable)', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const { controller, worker, store } = await setup(gpu, 2, { maxResidentBytes: 200 });
    const refs = await worker.runOnce(8);
    const s = await controller.status();
    assertEqual(refs.length + s.promptsPending, 2, 'every task committed or back in pending');
    assert(s.promptsPending >= 1, 'the over-budget one is pending again');
    assertEqual(s.promptsLeased, 0, 'no stranded lease');
    assertEqual(store.health().residentSamples, refs.length, 'nothing half-stored');
    for (const r of refs) store.abort(r.sampleId);
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'rejected tensors released');
    gpu.destroy();
  });
});
