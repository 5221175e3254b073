/**
 * Several TTT steps' metrics and soft cross-entropy in one dispatch each (src/kernels/loss-steps.ts):
 * stacked logits [n·R, D] against one call per step (eagle3MetricsRows, softCrossEntropyRows, which
 * test/kernels/loss-rows.test.ts checks against float64), in every row layout of this device. The
 * row terms, row losses and in-place gradients are the same bits; bad shapes and scales are refused.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { elementView } from '../../src/gpu/tensor-views.ts';
import { softCrossEntropyRows } from '../../src/kernels/loss.ts';
import { LOSS_ROW_GEOMETRY } from '../../src/kernels/loss-rows.ts';
import { eagle3MetricsSteps, softCrossEntropySteps } from '../../src/kernels/loss-steps.ts';
import { eagle3MetricsRows } from '../../src/kernels/metrics.ts';
import { availableRowVariants, rowDeviceFacts } from '../../src/kernels/row-variant.ts';
import { buildTeacher } from '../../src/kernels/teacher.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertRejects, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { randomMapping, randomMask, teacherLogits } from './loss-data.ts';

const [B, S] = [3, 7]; // steps shift inside each sequence of 7; step 3 leaves 4 live rows of 7
const R = B * S;
const [V, D] = [96, 40];
const [FIRST, STEPS] = [1, 3]; // steps 1, 2 and 3
const STRIDE = 64; // each step's rows on a 256-byte boundary: losses from s · 64 elements, terms from s · 256
const SCALES = [0.5 / R, (0.5 * 0.8) / R, (0.5 * 0.64) / R];

export default defineSuite('kernels/loss-steps', (t) => {
  t.test('n steps in one dispatch each give the bits of one call per step, in every row layout', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(71);
    const { used: usedIds, t2d: t2dIds } = randomMapping(rng, V, D);
    const T = gpu.upload([R, V], 'f32', teacherLogits(rng, R, V, usedIds), 'target');
    const used = gpu.upload([D], 'i32', usedIds, 'used');
    const lossMask = gpu.upload([B, S], 'i32', randomMask(rng, R, 0.8), 'lossMask');
    const p = gpu.tensor([R, D], 'f32', 'p');
    const pTilde = gpu.tensor([R, D], 'f32', 'pTilde');
    const tok = gpu.tensor([R], 'i32', 'tok');
    const positionMask = gpu.tensor([R], 'i32', 'positionMask');
    const t2d = gpu.upload([V], 'i32', t2dIds, 't2d');
    await buildTeacher(gpu, { logits: T, t2d, used, lossMask, p, pTilde, tok, positionMask }, { rows: R, vocab: V, draftVocab: D });
    const z = rng.floats(STEPS * R * D, 2);
    const teacher = { pTilde, tok, lossMask, positionMask, used };
    const variants = availableRowVariants('loss', LOSS_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx));
    note('variants', variants.join(' '));
    for (const variant of variants) {
      // One call per step, each on its own logits, into its rows of the tables.
      const lossA = gpu.zeros([STEPS, STRIDE], 'f32', 'rowLoss.perStep');
      const statsA = gpu.zeros([STEPS, 4 * STRIDE], 'f32', 'rowStats.perStep');
      const gradA = new Float32Array(STEPS * R * D);
      for (let s = 0; s < STEPS; s++) {
        const zs = gpu.upload([R, D], 'f32', z.subarray(s * R * D, (s + 1) * R * D), `logits.s${s}`);
        const step = { rows: R, draftVocab: D, seqLen: S, step: FIRST + s, slot: 0, variant };
        const rows = { ...step, window: { firstRow: 0, rows: R }, teacherWindow: undefined };
        const rowStats = elementView(gpu, statsA, s * 4 * STRIDE, 4 * R, `rowStats.s${s}`, [R, 4]);
        const rowLoss = elementView(gpu, lossA, s * STRIDE, R, `rowLoss.s${s}`);
        await eagle3MetricsRows(gpu, { logits: zs, ...teacher, rowStats }, rows);
        await softCrossEntropyRows(gpu, { logits: zs, p, positionMask, rowLoss }, { ...rows, grad: 'in-place', gradScale: SCALES[s] * R });
        gradA.set((await gpu.read(zs)) as Float32Array, s * R * D);
        gpu.release(zs);
      }
      // The steps at once, on their stacked logits.
      const lossB = gpu.zeros([STEPS, STRIDE], 'f32', 'rowLoss.steps');
      const statsB = gpu.zeros([STEPS, 4 * STRIDE], 'f32', 'rowStats.steps');
      const zAll = gpu.upload([STEPS * R, D], 'f32', z, 'logits.steps');
      const shape = { rows: R, seqLen: S, draftVocab: D, firstStep: FIRST, steps: STEPS, variant };
      await eagle3MetricsSteps(gpu, { logits: zAll, ...teacher, rowStats: statsB }, { ...shape, tableStride: 4 * STRIDE });
      await softCrossEntropySteps(
        gpu,
        { logits: zAll, p, positionMask, rowLoss: lossB },
        { ...shape, tableStride: STRIDE, grad: 'in-place', gradScales: SCALES },
      );
      assert(sameBits(await gpu.read(statsB), await gpu.read(statsA)), `${variant}: metric terms`);
      assert(sameBits(await gpu.read(lossB), await gpu.read(lossA)), `${variant}: row losses`);
      assert(sameBits(await gpu.read(zAll), gradA), `${variant}: gradients`);
      // Some rows of every step count, and the last step's rows past its sequences' ends are zero.
      const losses = (await gpu.read(lossB)) as Float32Array;
      for (let s = 0; s < STEPS; s++)
        assert(
          losses.subarray(s * STRIDE, s * STRIDE + R).some((x) => x > 0),
          `${variant}: step ${s} has a loss`,
        );
      assert(losses[(STEPS - 1) * STRIDE + S - 1] === 0, `${variant}: a row past its sequence's end has no loss`);
      gpu.release(lossA, statsA, lossB, statsB, zAll);
    }
    gpu.destroy();
  });

  t.test('bad shapes and scales are refused by name', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const p = gpu.tensor([R, D], 'f32', 'p');
    const positionMask = gpu.tensor([R], 'i32', 'positionMask');
    const logits = gpu.tensor([STEPS * R, D], 'f32', 'logits');
    const rowLoss = gpu.tensor([STEPS, STRIDE], 'f32', 'rowLoss');
    const shape = { rows: R, seqLen: S, draftVocab: D, firstStep: 0, steps: STEPS, tableStride: STRIDE };
    const ce = (o: Partial<Parameters<typeof softCrossEntropySteps>[2]>, x: Partial<Parameters<typeof softCrossEntropySteps>[1]> = {}) =>
      softCrossEntropySteps(gpu, { logits, p, positionMask, rowLoss, ...x }, { ...shape, grad: 'in-place', gradScales: SCALES, ...o });
    await assertRejects(
      () => ce({ gradScales: [1, 2] }),
      /softCrossEntropySteps: grad 'in-place' needs one finite gradScales entry per step \(3\)/,
      'scales',
    );
    await assertRejects(
      () => ce({ tableStride: R - 1 }),
      /softCrossEntropySteps: tableStride 20 is below one step's 21 × 1 elements/,
      'stride',
    );
    await assertRejects(
      () => ce({ steps: 17, tableStride: 1 + R }),
      /softCrossEntropySteps: steps 17 exceeds the 16 one dispatch holds/,
      'too many steps',
    );
    await assertRejects(
      () => ce({}, { logits: gpu.tensor([R, D], 'f32', 'oneStep') }),
      /softCrossEntropySteps: logits \(oneStep\) has shape \[21, 40\]; expected 63 rows × 40/,
      'logits of one step',
    );
    await assertRejects(
      () => ce({}, { rowLoss: gpu.tensor([2, STRIDE], 'f32', 'short') }),
      /softCrossEntropySteps: table \(short\) must be one f32 binding of at least 3 rows of stride 64/,
      'short table',
    );
    gpu.destroy();
  });
});
