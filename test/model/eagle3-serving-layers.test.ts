/**
 * Which aux layers SGLang and vLLM can capture for an EAGLE3 draft (src/model/eagle3/serving-layers.ts):
 * three distinct layers below N − 1, refused where the target has such a set and only flagged where it
 * has none; vLLM's names for them; and a training checkpoint's export, which refuses or flags the same
 * way (src/training/checkpoints/checkpoint-export.ts).
 */
import { auxLayerServing, auxLayerServingProblems, hasServableAuxLayers, vllmAuxLayerIds } from '../../src/model/eagle3/serving-layers.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { AdamWBackend } from '../../src/optim/adamw-backend.ts';
import { exportEagle3Checkpoint, eagle3RunExtras } from '../../src/training/checkpoints/checkpoint-export.ts';
import { saveCheckpoint } from '../../src/training/checkpoints/train-checkpoint.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { FIXTURE_OPTIMIZER, loadEagle3Fixture } from './eagle3-fixture.ts';

export default defineSuite('model/eagle3-serving-layers', (t) => {
  t.test('three distinct layers below N − 1; repeated and last layers named; vLLM ids are + 1', () => {
    assertDeepEqual(auxLayerServingProblems([1, 15, 28], 32), [], 'Llama-3.1-8B default: servable');
    assertDeepEqual(auxLayerServingProblems([0, 1, 2], 4), [], 'the smallest servable target');
    const lab = auxLayerServingProblems([0, 1, 1], 2);
    assertEqual(lab.length, 2, `the lab target's [0, 1, 1]: a repeat and the last layer: ${lab.join('; ')}`);
    assert(/^layer 1 repeated/.test(lab[0]) && /^layer 1 of a 2-layer target is not capturable/.test(lab[1]), lab.join('; '));
    assert(/^2 layers, not 3$/.test(auxLayerServingProblems([1, 2], 8)[0]), 'two layers');
    assertEqual(hasServableAuxLayers(3), false, '3 layers: only 0 and 1 capturable');
    assertEqual(hasServableAuxLayers(4), true, '4 layers: 0, 1, 2');
    assertDeepEqual(vllmAuxLayerIds([1, 15, 28]), [2, 16, 29], 'vLLM names the layer whose input it captures');
    assertEqual(auxLayerServing([1, 15, 28], 32), undefined, 'servable: no verdict');
    assertEqual(auxLayerServing([1, 15, 31], 32)?.refuse, true, 'a 32-layer target has a servable set: refused');
    assertEqual(auxLayerServing([0, 1, 1], 2)?.refuse, false, 'a 2-layer target has none: flagged only');
  });

  t.test(
    "a checkpoint's export: refused for layers SGLang cannot capture on a target that has a servable set, flagged on one that has none",
    async ({ gpu: ctx, platform, fixture }) => {
      const fx = await loadEagle3Fixture(fixture, '');
      const tmp = tempStore(platform, 'eagle3-serving-layers');
      const gpu = new Gpu(ctx);
      const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
      try {
        for (const name of fx.trainable) backend.addParameter(name, fx.file.shape(`param.${name}`), fx.params[name]);
        const vocab = { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t };
        const save = async (runId: string, auxLayerIds: number[], targetLayers: number) => {
          const { extra, buffers } = eagle3RunExtras({
            mode: 'online',
            draftConfig: fx.config,
            auxLayerIds,
            targetLayers,
            vocab,
            settings: {},
          });
          const ref = await saveCheckpoint(tmp.files, gpu, backend, {
            runId,
            globalStep: 1,
            microStep: 1,
            epoch: 0,
            data: { epochBatch: 1, epochSamples: 2, samplesConsumed: 2 },
            contract: { strategy: 'eagle3', tttLength: 4, batchSize: 2, accumulationSteps: 1, draftConfigHash: runId },
            buffers,
            extra,
          });
          return ref.dir;
        };
        const refused = await save('six', [1, 2, 5], 6);
        await assertRejects(
          () => exportEagle3Checkpoint(tmp.files, refused, tmp.files, 'out-six'),
          /six-step1: refused to export: aux layers \[1, 2, 5\]: layer 5 of a 6-layer target is not capturable/,
          'a 6-layer target has a servable set: refused, naming the checkpoint and the layer',
        );
        assertDeepEqual(await tmp.files.list('out-six'), [], 'nothing written');
        const flagged = await exportEagle3Checkpoint(tmp.files, await save('two', [0, 1, 1], 2), tmp.files, 'out-two');
        assertEqual(flagged.serving.servable, false, 'a 2-layer target: written, flagged');
        assert(
          /a 2-layer target has no 3 distinct layers SGLang or vLLM can capture/.test(flagged.serving.warning ?? ''),
          'the warning says why',
        );
        assertEqual((await tmp.files.list('out-two')).length, 2, 'config.json and model.safetensors written');
        const servable = await exportEagle3Checkpoint(tmp.files, await save('good', [0, 2, 4], 6), tmp.files, 'out-good');
        assertDeepEqual(servable.serving, { servable: true }, 'three distinct capturable layers: servable');
      } finally {
        backend.destroy();
        gpu.destroy();
        await tmp.cleanup();
      }
    },
  );
});
