/**
 * TargetFeatureSource: the GPU target as the rollout FeatureSource (EAGLE3 capture, docs/features.md §8).
 *   - Capture parity on hf/llama-tiny: the aux states at the default layers of a 6-layer target,
 *     [0, 2, 4] (SpecForge's rule repeats a layer there), equal HF hidden_states[1], [3], [5]
 *     concatenated; target = logits[1:] with a zero last row; input_ids shifted left; loss_mask
 *     unshifted with its last position zeroed (the zero target row).
 *   - The same capture, at SpecForge's own layers [1, 2, 2], against what SpecForge fed its EAGLE3
 *     model (eagle3/eagle3_reference).
 *   - Grouping by length (one forward per group), results in task order and batch-invariant.
 *   - Loud errors for unsupported captures and bad payloads.
 *   - End to end behind a RolloutWorker: prompts in, verified features in the store, refs committed.
 */
import { makePromptTask, type PromptTask } from '../../src/contracts/index.ts';
import { DataFlowController } from '../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../src/control/metadata-store.ts';
import { LocalFeatureStore } from '../../src/data/local-feature-store.ts';
import { loadHfCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { verifyCapture } from '../../src/inference/capture.ts';
import { RolloutWorker } from '../../src/inference/rollout-worker.ts';
import { defaultAuxLayerIds, eagle3CaptureConfig, TargetFeatureSource } from '../../src/inference/target-feature-source.ts';
import { TargetModel } from '../../src/model/target/model.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertRelClose, assertThrows } from '../harness/assert.ts';
import { defineSuite, type TestContext } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../model/synthetic-checkpoint.ts';

const TOL = 1e-4;

function task(id: string, inputIds: number[], lossMask?: number[], maxLength = 4096): PromptTask {
  return makePromptTask({
    taskId: id,
    runId: 'run',
    sourceId: 'test',
    payload: lossMask ? { input_ids: inputIds, loss_mask: lossMask } : { input_ids: inputIds },
    maxLength,
  });
}

async function setup(ctx: TestContext): Promise<{ gpu: Gpu; model: TargetModel; ref: SafetensorsFile }> {
  const tmp = tempStore(ctx.platform, 'capture-llama');
  try {
    await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'm');
    const checkpoint = await loadHfCheckpoint(tmp.files, 'm');
    const gpu = new Gpu(ctx.gpu);
    return {
      gpu,
      model: TargetModel.create(gpu, checkpoint),
      ref: new SafetensorsFile(await ctx.fixture('hf/llama-tiny/reference.safetensors'), 'llama-tiny/reference.safetensors'),
    };
  } finally {
    await tmp.cleanup();
  }
}

/** Row b of a [B, S, W] array, first `len` rows. */
function rowsOf(x: ArrayLike<number>, b: number, seq: number, width: number, len: number, from = 0): Float32Array {
  return Float32Array.from(Array.prototype.slice.call(x, (b * seq + from) * width, (b * seq + from + len) * width) as number[]);
}

/** Fixture rows as tasks: valid lengths from the attention mask, loss masks as given. */
function fixtureTasks(ids: Int32Array, mask: Int32Array, seq: number, lossMask: (b: number, t: number) => number): PromptTask[] {
  const out: PromptTask[] = [];
  for (let b = 0; b < mask.length / seq; b++) {
    let len = 0;
    while (len < seq && mask[b * seq + len]) len++;
    out.push(
      task(
        `t${b}`,
        [...ids.subarray(b * seq, b * seq + len)],
        Array.from({ length: len }, (_, t) => lossMask(b, t)),
      ),
    );
  }
  return out;
}

export default defineSuite('inference/target-feature-source', (t) => {
  t.test('capture parity: aux = HF hidden_states[1, 3, 5], target = logits[1:], shifted ids, unshifted loss mask', async (ctx) => {
    const { gpu, model, ref } = await setup(ctx);
    try {
      const [, seq] = ref.shape('input_ids');
      const ids = ref.i32('input_ids');
      const mask = ref.i32('attention_mask');
      const { hiddenSize: H, vocabSize: V } = model.config;
      const capture = eagle3CaptureConfig(model.config);
      assertDeepEqual(capture.auxLayerIds, [0, 2, 4], 'default aux layers of a 6-layer target');
      const tasks = fixtureTasks(ids, mask, seq, (b, t) => ((t * (b + 2)) % 3 === 0 ? 0 : 1));
      const source = new TargetFeatureSource(model);
      const features = await source.generateFeatures(tasks, capture);
      assertEqual(source.forwards, 1, 'one batched forward for both tasks');
      let worst = 0;
      for (const [b, f] of features.entries()) {
        const L = (tasks[b].payload.input_ids as number[]).length;
        verifyCapture(f.tensors, capture, { sampleId: tasks[b].taskId, recordedAuxLayerIds: f.auxLayerIds });
        assertDeepEqual(f.auxLayerIds, [0, 2, 4], 'recorded aux layer ids');
        assertDeepEqual(f.tensors.hidden_state.shape, [L, 3 * H], 'hidden_state shape');
        const hs = await gpu.read(f.tensors.hidden_state);
        const want = new Float32Array(L * 3 * H);
        [1, 3, 5].forEach((index, i) => {
          const layer = rowsOf(ref.f32(`hidden_states.${index}`), b, seq, H, L);
          for (let r = 0; r < L; r++) want.set(layer.subarray(r * H, (r + 1) * H), r * 3 * H + i * H);
        });
        worst = Math.max(worst, assertRelClose(hs, want, TOL, `task ${b} hidden_state`));
        const target = await gpu.read(f.tensors.target);
        worst = Math.max(
          worst,
          assertRelClose(
            target.subarray(0, (L - 1) * V),
            rowsOf(ref.f32('logits'), b, seq, V, L - 1, 1),
            TOL,
            `task ${b} target = logits[1:]`,
          ),
        );
        assert(
          target.subarray((L - 1) * V).every((v) => v === 0),
          `task ${b}: last target row is zero`,
        );
        const x = tasks[b].payload.input_ids as number[];
        assertDeepEqual([...(await gpu.read(f.tensors.input_ids))], [...x.slice(1), 0], `task ${b} input_ids shifted`);
        const payloadMask = tasks[b].payload.loss_mask as number[];
        assertDeepEqual(
          [...(await gpu.read(f.tensors.loss_mask))],
          [...payloadMask.slice(0, L - 1), 0],
          `task ${b} loss_mask unshifted, last position zeroed`,
        );
        gpu.release(...Object.values(f.tensors));
      }
      ctx.note('worst rel err', worst.toExponential(2));
    } finally {
      model.destroy();
      gpu.destroy();
    }
  });

  t.test('matches the tensors SpecForge fed its EAGLE3 model (eagle3_reference)', async (ctx) => {
    const { gpu, model } = await setup(ctx);
    try {
      const e = new SafetensorsFile(await ctx.fixture('eagle3/eagle3_reference.safetensors'), 'eagle3_reference.safetensors');
      const [, seq] = e.shape('raw.input_ids');
      const rawLoss = e.i32('raw.loss_mask');
      const tasks = fixtureTasks(e.i32('raw.input_ids'), e.i32('attention_mask'), seq, (b, t) => rawLoss[b * seq + t]);
      // SpecForge's own rule for 6 layers, [1, 2, 2] (the layers its reference captured).
      const features = await new TargetFeatureSource(model).generateFeatures(tasks, eagle3CaptureConfig(model.config, [1, 2, 2]));
      const { hiddenSize: H, vocabSize: V } = model.config;
      const shiftedIds = e.i32('input_ids');
      const lossMask = e.i32('loss_mask');
      let worst = 0;
      for (const [b, f] of features.entries()) {
        const L = f.tensors.input_ids.shape[0];
        worst = Math.max(
          worst,
          assertRelClose(
            await gpu.read(f.tensors.hidden_state),
            rowsOf(e.f32('hidden_states'), b, seq, 3 * H, L),
            TOL,
            `sample ${b} hidden_states`,
          ),
        );
        // Rows before the last valid one: SpecForge's last valid row reads a padded position's logits.
        const target = await gpu.read(f.tensors.target);
        worst = Math.max(
          worst,
          assertRelClose(target.subarray(0, (L - 1) * V), rowsOf(e.f32('target'), b, seq, V, L - 1), TOL, `sample ${b} target`),
        );
        const ids = await gpu.read(f.tensors.input_ids);
        assertDeepEqual([...ids.subarray(0, L - 1)], [...shiftedIds.subarray(b * seq, b * seq + L - 1)], `sample ${b} shifted input_ids`);
        assertDeepEqual(
          [...(await gpu.read(f.tensors.loss_mask))],
          [...lossMask.subarray(b * seq, b * seq + L)],
          `sample ${b} loss_mask (SpecForge's normalised mask)`,
        );
        gpu.release(...Object.values(f.tensors));
      }
      ctx.note('worst rel err', worst.toExponential(2));
    } finally {
      model.destroy();
      gpu.destroy();
    }
  });

  t.test('groups by length under a token budget; results in task order, independent of batching', async (ctx) => {
    const { gpu, model, ref } = await setup(ctx);
    try {
      const ids = [...ref.i32('gen.prompt_ids')];
      const tasks = [task('a', ids.slice(0, 4)), task('b', ids.slice(2, 8)), task('c', ids.slice(5, 9), undefined, 3)];
      const capture = eagle3CaptureConfig(model.config, [0, 3, 5]);
      const grouped = new TargetFeatureSource(model, { maxBatchTokens: 12 });
      const features = await grouped.generateFeatures(tasks, capture);
      assertEqual(grouped.forwards, 2, 'lengths 6 + 4 share a forward, the other 4 (truncated to 3) gets its own');
      assertDeepEqual(
        features.map((f) => f.tensors.input_ids.shape[0]),
        [4, 6, 3],
        'task order and maxLength truncation',
      );
      for (const [i, f] of features.entries()) {
        const [alone] = await new TargetFeatureSource(model).generateFeatures([tasks[i]], capture);
        for (const name of ['hidden_state', 'target'] as const) {
          assertRelClose(await gpu.read(f.tensors[name]), await gpu.read(alone.tensors[name]), 1e-5, `task ${i} ${name} batched vs alone`);
        }
        const L = f.tensors.loss_mask.shape[0];
        assertDeepEqual(
          [...(await gpu.read(f.tensors.loss_mask))],
          [...new Array<number>(L - 1).fill(1), 0],
          'loss mask defaults to ones (last zeroed)',
        );
        gpu.release(...Object.values(f.tensors), ...Object.values(alone.tensors));
      }
    } finally {
      model.destroy();
      gpu.destroy();
    }
  });

  t.test('behind a RolloutWorker: one forward, verified captures stored, refs committed', async (ctx) => {
    const { gpu, model, ref } = await setup(ctx);
    try {
      const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
      const store = new LocalFeatureStore(gpu);
      const source = new TargetFeatureSource(model);
      const capture = eagle3CaptureConfig(model.config);
      const worker = await RolloutWorker.create(controller, source, store, gpu, capture, { workerId: 'w0' });
      const ids = [...ref.i32('gen.prompt_ids')];
      const lengths = [12, 7, 9];
      await controller.ingestPrompts(
        lengths.map((n, i) => ({
          taskId: `p${i}`,
          payload: { input_ids: ids.slice(0, n), loss_mask: ids.slice(0, n).map((_, t) => (t < 3 ? 0 : 1)) },
          maxLength: 64,
        })),
      );
      const refs = await worker.runOnce(8);
      assertDeepEqual(
        refs.map((r) => r.sampleId),
        ['run:p0', 'run:p1', 'run:p2'],
        'one ref per prompt, in order',
      );
      assertEqual(source.forwards, 1, 'one batched forward');
      assertEqual((await controller.status()).queueDepth, 3, 'queue depth');
      for (const [i, r] of refs.entries()) {
        const { tensors, handle } = await store.get(r);
        assertDeepEqual(tensors.hidden_state.shape, [lengths[i], 3 * model.config.hiddenSize], `sample ${i} hidden_state shape`);
        assertDeepEqual(tensors.target.shape, [lengths[i], model.config.vocabSize], `sample ${i} target shape`);
        assertDeepEqual([...(await gpu.read(tensors.input_ids))], [...ids.slice(1, lengths[i]), 0], `sample ${i} shifted ids`);
        store.release(handle);
      }
    } finally {
      model.destroy();
      gpu.destroy();
    }
  });

  t.test('refuses unsupported captures and bad payloads with a clear message', async (ctx) => {
    const { gpu, model } = await setup(ctx);
    try {
      const source = new TargetFeatureSource(model);
      const capture = eagle3CaptureConfig(model.config);
      const ok = [task('ok', [1, 2, 3])];
      await assertRejects(
        () => source.generateFeatures(ok, { ...capture, targetRepr: 'pruned_logits' }),
        /"pruned_logits" is not produced \(only "logits" and "hidden_state"\)/,
        'repr',
      );
      await assertRejects(
        () => source.generateFeatures(ok, { ...capture, auxLayerIds: [] }),
        /auxLayerIds is empty \(the EAGLE3 default for this target is \[0, 2, 4\]\)/,
        'empty ids',
      );
      await assertRejects(
        () => source.generateFeatures(ok, { ...capture, auxLayerIds: [1, 2, 6] }),
        /aux layer id 6 outside 0..5/,
        'layer range',
      );
      await assertRejects(() => source.generateFeatures(ok, { ...capture, targetHiddenSize: 32 }), /targetHiddenSize 32/, 'hidden size');
      await assertRejects(
        () => source.generateFeatures([task('bad', [1, 384])], capture),
        /task bad: payload.input_ids\[1\] = 384 is not a token id/,
        'token id',
      );
      await assertRejects(
        () => source.generateFeatures([task('short', [1, 2], [1])], capture),
        /task short: payload.loss_mask must be an array of 2 values/,
        'mask length',
      );
      assertDeepEqual(defaultAuxLayerIds(3), [0, 1, 2], 'a 3-layer target: first, second, last');
      assertThrows(() => defaultAuxLayerIds(0), /at least one layer/, 'no layers');
      assertDeepEqual(defaultAuxLayerIds(32), [1, 15, 28], 'Llama-3.1-8B layers');
      assertDeepEqual(defaultAuxLayerIds(7), [1, 2, 3], "SpecForge's rule from 7 layers");
      for (const [n, ids] of [
        [4, [0, 1, 2]],
        [5, [0, 1, 3]],
        [6, [0, 2, 4]],
      ] as const)
        assertDeepEqual(
          defaultAuxLayerIds(n),
          [...ids],
          `${n} layers: SpecForge's rule repeats a layer; three distinct capturable ones instead`,
        );
    } finally {
      model.destroy();
      gpu.destroy();
    }
  });
});
