/**
 * AdamWBackend's step accounting (src/optim/adamw-backend.ts): a step the GPU skipped for a non-finite
 * gradient norm moves the LR schedule on but not bias correction, as PyTorch's AdamW state['step']
 * does when a scaler skips optimizer.step(). Checked against the float64 reference update.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { AdamWBackend, type OptimizerConfig } from '../../src/optim/adamw-backend.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertEqual, assertRelClose, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { initialAdamwState, optimizerStepRef } from './optimizer-step-ref.ts';

const CONFIG: OptimizerConfig = {
  lr: 1e-2,
  beta1: 0.8,
  beta2: 0.95,
  eps: 1e-6,
  weightDecay: 0.01,
  maxGradNorm: 0.5,
  schedule: { kind: 'cosine', totalSteps: 8, warmupRatio: 0.25 },
};

export default defineSuite('optim/adamw-backend', (t) => {
  t.test('a skipped step advances the schedule, not bias correction; the next update matches the reference', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(91);
    const n = 257;
    const backend = new AdamWBackend(gpu, CONFIG);
    try {
      const init = Float32Array.from(rng.floats(n));
      const p = backend.addParameter('w', [n], init);
      const grads = [Float32Array.from(rng.floats(n, 0.3)), Float32Array.from(rng.floats(n, 0.3)), Float32Array.from(rng.floats(n, 0.3))];
      grads[1][5] = Number.NaN; // step 2: the norm is NaN, the GPU skips it

      let ref = initialAdamwState(init);
      const refStep = (g: Float32Array, scheduleIndex: number, biasStep: number) =>
        optimizerStepRef([ref], [g], CONFIG, scheduleIndex, biasStep).states[0];
      for (const [i, g] of grads.entries()) {
        gpu.write(p.grad, g);
        const report = await backend.optimizerStep();
        const norm = await report.gradNorm;
        if (!Number.isFinite(norm)) backend.markSkipped(report.step);
        assertEqual(report.step, i + 1, 'the schedule counts every step');
      }
      assertEqual(backend.step, 3, 'steps');
      assertEqual(backend.skippedSteps, 1, 'skipped');
      assertEqual(backend.appliedUpdates, 2, 'applied updates');

      ref = refStep(grads[0], 0, 1);
      const withoutSkip = refStep(grads[2], 2, 3); // what the code did before: t counted the skip
      ref = refStep(grads[2], 2, 2);
      const got = await gpu.read(p.value);
      const err = assertRelClose(got, ref.param, 1e-5, 'weights after step 3 (bias correction t = 2, schedule index 2)');
      note('worstRelErr', err);
      let apart = 0;
      for (let i = 0; i < n; i++) apart = Math.max(apart, Math.abs(withoutSkip.param[i] - ref.param[i]));
      assert(apart > 1e-4, `bias correction with t = 3 would give other weights (max difference ${apart})`);
    } finally {
      backend.destroy();
      gpu.destroy();
    }
  });

  t.test('a skip must be reported before the next step is encoded', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const backend = new AdamWBackend(gpu, CONFIG);
    try {
      backend.addParameter('w', [4], [1, 2, 3, 4]);
      for (let i = 0; i < 2; i++) await (await backend.optimizerStep()).gradNorm;
      assertThrows(() => backend.markSkipped(1), /markSkipped\(1\): the newest optimizer step is 2/, 'a late report');
      backend.markSkipped(2);
      assertThrows(() => backend.markSkipped(2), /markSkipped\(2\): step 2 is already marked skipped/, 'the same step twice');
    } finally {
      backend.destroy();
      gpu.destroy();
    }
  });
});
