/**
 * Activation recompute (src/model/eagle3/step-body.ts): a training step that keeps only each TTT
 * step's h_in, h_out, final 1/rms and dF, and encodes each step's body again in the backward, gives
 * the bits of the step that keeps every activation: losses, metric sums, every gradient, the
 * preclip norm and the weights after one AdamW step. Checked on an unsplit GPU and under a binding
 * limit that splits the weights (so the recomputed matmuls go part by part as the kept ones did), and
 * against the float64 reference. The step holds less at its peak, and nothing leaks.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import type { GpuContext } from '../../src/gpu/context.ts';
import { Eagle3DraftModel } from '../../src/model/eagle3/model.ts';
import { AdamWBackend } from '../../src/optim/adamw-backend.ts';
import { assert, assertEqual, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import type { Eagle3Config } from '../../src/config/eagle3-config.ts';
import { eagle3ParameterShapes } from '../../src/config/eagle3-config.ts';
import { eagle3StepReference } from '../../src/reference/eagle3.ts';
import { FIXTURE_OPTIMIZER, releaseInputs } from './eagle3-fixture.ts';
import {
  randomEagle3Problem,
  readTrainedStep,
  SPLITTABLE_DRAFT,
  uploadRandomInputs,
  type RandomProblemLayout,
  type TrainedStep,
} from './eagle3-random.ts';

const CONFIG: Eagle3Config = SPLITTABLE_DRAFT;
/** 2 sequences of 24 with different padding (3 TTT steps): activations dominate the step's memory. */
const LAYOUT: RandomProblemLayout = { seqLen: 24, lengths: [24, 19], usedOffset: 1, lossStart: 1 };
/** 28 KiB: fc, q, gate, up, down and lm_head are split into parts; every activation of a step ([48, 128] f32 at most) fits one binding. */
const LIMIT = 28 * 1024;

interface StepBits extends TrainedStep {
  /** Peak GPU bytes of the training step (forward and backward) over what was live before it. */
  stepPeak: number;
}

async function trainStep(gpu: Gpu, seed: number, recompute: boolean): Promise<StepBits> {
  const { values, inputs: x } = randomEagle3Problem(CONFIG, seed, LAYOUT);
  const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
  const model = new Eagle3DraftModel(gpu, backend, CONFIG, values, { t2d: x.t2d, d2t: x.d2t });
  const inputs = uploadRandomInputs(gpu, CONFIG, x);
  // Freed buffers stay pooled: drop them so the window measures what this step allocates.
  gpu.trimPool();
  const before = gpu.memoryStats().liveBytes;
  gpu.resetMemoryPeak();
  const out = await model.trainStep(inputs, { tttLength: x.tttLength, lossScale: 0.5, recompute });
  const stepPeak = gpu.memoryStats().peakBytes - before;
  const bits: StepBits = { ...(await readTrainedStep(gpu, backend, CONFIG, out)), stepPeak };
  releaseInputs(gpu, inputs);
  model.destroy();
  backend.destroy();
  assertEqual(gpu.pool.stats().liveBuffers, 1, `recompute ${recompute}: every GPU buffer released but the loss placeholder`);
  return bits;
}

function assertSameBits(got: StepBits, kept: StepBits, what: string): void {
  const names = eagle3ParameterShapes(CONFIG).map(([n]) => n);
  assert(sameBits(got.losses, kept.losses), `${what}: losses`);
  assert(sameBits(got.metricSums, kept.metricSums), `${what}: metric sums`);
  names.forEach((n, i) => assert(sameBits(got.grads[i], kept.grads[i]), `${what}: grad ${n}`));
  assert(Object.is(got.gradNorm, kept.gradNorm), `${what}: preclip grad norm`);
  names.forEach((n, i) => assert(sameBits(got.updated[i], kept.updated[i]), `${what}: ${n} after one AdamW step`));
}

function splitGpu(ctx: GpuContext): Gpu {
  const gpu = new Gpu(ctx);
  Object.defineProperty(gpu, 'maxBindingBytes', { value: LIMIT });
  return gpu;
}

export default defineSuite('model/eagle3-step-body', (t) => {
  t.test(
    'activation recompute gives the bits of the kept step (losses, gradients, one AdamW step), split or not, with a lower peak',
    async ({ gpu: ctx, note }) => {
      const seed = 23;
      for (const [label, make] of [
        ['unsplit', (c: GpuContext) => new Gpu(c)],
        ['split weights', splitGpu],
      ] as const) {
        const gpu = make(ctx);
        try {
          const kept = await trainStep(gpu, seed, false);
          const recomputed = await trainStep(gpu, seed, true);
          assertSameBits(recomputed, kept, label);
          assert(
            recomputed.stepPeak < kept.stepPeak,
            `${label}: the recomputing step peaks lower (${recomputed.stepPeak} < ${kept.stepPeak} bytes)`,
          );
          note(`${label}: step peak kept → recompute`, `${kept.stepPeak} → ${recomputed.stepPeak} bytes`);
          if (label === 'unsplit') {
            // And both against float64 with model/eagle3's tolerances.
            const { values, inputs: x } = randomEagle3Problem(CONFIG, seed, LAYOUT);
            const ref = eagle3StepReference(CONFIG, values, x, { lossScale: 0.5 });
            assertRelClose(recomputed.losses, [...ref.steps.map((s) => s.ploss), ref.totalLoss], 1e-5, 'losses vs float64');
            const names = eagle3ParameterShapes(CONFIG).map(([n]) => n);
            names.forEach((n, i) => assertRelClose(recomputed.grads[i], ref.grads[n], 1e-4, `grad ${n} vs float64`));
          }
        } finally {
          gpu.destroy();
        }
      }
    },
  );
});
