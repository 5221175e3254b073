/**
 * Row windows of the loss family (src/kernels/loss-rows.ts `RowWindow`; the chunked head of
 * src/model/eagle3/step-head.ts): the teacher, the metrics and the soft cross-entropy run window by
 * window — each window's logits, gradient and teacher rows (shifted by the TTT step) in buffers of
 * their own, the loss and metric rows summed once at the end — give the bits of the whole calls,
 * which test/kernels/loss-rows.test.ts checks against float64. Windows outside the rows are refused.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { reduceStepLoss, softCrossEntropy, softCrossEntropyRows } from '../../src/kernels/loss.ts';
import { eagle3Metrics, eagle3MetricsRows, reduceMetrics } from '../../src/kernels/metrics.ts';
import { buildTeacher } from '../../src/kernels/teacher.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertRejects, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { randomMapping, randomMask, teacherLogits } from './loss-data.ts';

const [B, S, K] = [3, 7, 2]; // 21 rows; TTT step 2 shifts inside each sequence of 7
const ROWS = B * S;
const [V, D] = [96, 40];

export default defineSuite('kernels/loss-rows-windows', (t) => {
  t.test('teacher, metrics and soft CE window by window give the bits of the whole calls', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(61);
    const { used: usedIds, t2d: t2dIds } = randomMapping(rng, V, D);
    const T = gpu.upload([ROWS, V], 'f32', teacherLogits(rng, ROWS, V, usedIds), 'target');
    const t2d = gpu.upload([V], 'i32', t2dIds, 't2d');
    const used = gpu.upload([D], 'i32', usedIds, 'used');
    const lossMask = gpu.upload([B, S], 'i32', randomMask(rng, ROWS, 0.8), 'lossMask');
    const z = rng.floats(ROWS * D, 2);
    const shape = { rows: ROWS, vocab: V, draftVocab: D };
    const step = { rows: ROWS, draftVocab: D, seqLen: S, step: K };

    // Whole: the teacher once, the step's metrics and loss with a separate gradient.
    const p = gpu.tensor([ROWS, D], 'f32', 'p');
    const pTilde = gpu.tensor([ROWS, D], 'f32', 'pTilde');
    const tok = gpu.tensor([ROWS], 'i32', 'tok');
    const pm = gpu.tensor([ROWS], 'i32', 'positionMask');
    await buildTeacher(gpu, { logits: T, t2d, used, lossMask, p, pTilde, tok, positionMask: pm }, shape);
    const Z = gpu.upload([ROWS, D], 'f32', z, 'logits');
    const G = gpu.tensor([ROWS, D], 'f32', 'dlogits');
    const wholeLoss = gpu.zeros([2], 'f32', 'lossOut');
    const wholeMetrics = gpu.zeros([4], 'f32', 'metricsOut');
    await eagle3Metrics(gpu, { logits: Z, pTilde, tok, lossMask, positionMask: pm, used, metricsOut: wholeMetrics }, { ...step, slot: 0 });
    const total = { slot: 1, weight: 0.8, accumulate: false };
    await softCrossEntropy(
      gpu,
      { logits: Z, p, positionMask: pm, dlogits: G, lossOut: wholeLoss },
      { ...step, grad: 'separate', gradScale: 0.5, slot: 0, total },
    );

    // Windows of 5 rows: teacher rows [r0 + k, r0 + k + n) built per window, tok and position mask [R].
    const tokW = gpu.tensor([ROWS], 'i32', 'tokW');
    const pmW = gpu.tensor([ROWS], 'i32', 'positionMaskW');
    const rowLoss = gpu.tensor([ROWS], 'f32', 'rowLoss');
    const rowStats = gpu.tensor([ROWS, 4], 'f32', 'rowStats');
    const gradW = new Float32Array(ROWS * D);
    // Step 0's windows fill tok and the position mask (as the chunked head's step 0 does).
    for (let r0 = 0; r0 < ROWS; r0 += 5) {
      const n = Math.min(5, ROWS - r0);
      const [pw, qw] = [gpu.tensor([n, D], 'f32', 'pw'), gpu.tensor([n, D], 'f32', 'qw')];
      await buildTeacher(gpu, { logits: T, t2d, used, lossMask, p: pw, pTilde: qw, tok: tokW, positionMask: pmW }, shape, {
        window: { firstRow: r0, rows: n },
      });
      gpu.release(pw, qw);
    }
    let windows = 0;
    for (let r0 = 0; r0 < ROWS; r0 += 5) {
      const n = Math.min(5, ROWS - r0);
      const window = { firstRow: r0, rows: n };
      // A window whose every row is past its sequence's end reads no teacher row: one unread row is bound.
      const past = r0 + K >= ROWS;
      const teacherWindow = past ? { firstRow: ROWS - 1, rows: 1 } : { firstRow: r0 + K, rows: Math.min(n, ROWS - r0 - K) };
      const pw = gpu.tensor([teacherWindow.rows, D], 'f32', 'pw');
      const qw = gpu.tensor([teacherWindow.rows, D], 'f32', 'qw');
      if (!past)
        await buildTeacher(gpu, { logits: T, t2d, used, lossMask, p: pw, pTilde: qw, tok: tokW, positionMask: pmW }, shape, {
          window: teacherWindow,
        });
      const zw = gpu.upload([n, D], 'f32', z.subarray(r0 * D, (r0 + n) * D), 'zw');
      const gw = gpu.tensor([n, D], 'f32', 'gw');
      const windowed = { ...step, window, teacherWindow, slot: 0 };
      await eagle3MetricsRows(gpu, { logits: zw, pTilde: qw, tok: tokW, lossMask, positionMask: pmW, used, rowStats }, windowed);
      await softCrossEntropyRows(
        gpu,
        { logits: zw, p: pw, positionMask: pmW, dlogits: gw, rowLoss },
        { ...windowed, grad: 'separate', gradScale: 0.5 },
      );
      gradW.set((await gpu.read(gw)) as Float32Array, r0 * D);
      gpu.release(pw, qw, zw, gw);
      windows++;
    }
    const lossW = gpu.zeros([2], 'f32', 'lossW');
    const metricsW = gpu.zeros([4], 'f32', 'metricsW');
    await reduceMetrics(gpu, rowStats, metricsW, { rows: ROWS, slot: 0 });
    await reduceStepLoss(gpu, rowLoss, lossW, { rows: ROWS, slot: 0, total });

    assert(sameBits(await gpu.read(lossW), await gpu.read(wholeLoss)), 'loss and weighted total');
    assert(sameBits(await gpu.read(metricsW), await gpu.read(wholeMetrics)), 'metric sums');
    assert(sameBits(gradW, await gpu.read(G)), 'gradient');
    assert(sameBits(await gpu.read(pmW), await gpu.read(pm)), 'position mask');
    assert(sameBits(await gpu.read(tokW), await gpu.read(tok)), 'tok');
    note('windows', windows);

    // A window past the rows, and a logits tensor that is not the window's size, are refused by name.
    const bad = gpu.tensor([4, D], 'f32', 'bad');
    await assertRejects(
      () =>
        softCrossEntropyRows(
          gpu,
          { logits: bad, p, positionMask: pm, rowLoss },
          { ...step, window: { firstRow: 19, rows: 4 }, teacherWindow: undefined, grad: 'none', slot: 0 },
        ),
      /softCrossEntropy: logits window \[19, 23\) runs past the 21 rows/,
      'window past the rows',
    );
    await assertRejects(
      () =>
        eagle3MetricsRows(
          gpu,
          { logits: bad, pTilde, tok, lossMask, positionMask: pm, used, rowStats },
          { ...step, window: { firstRow: 0, rows: 5 }, teacherWindow: undefined, slot: 0 },
        ),
      /eagle3Metrics: logits \(bad\) has shape \[4, 40\]; expected 5 rows × 40/,
      'logits of another size',
    );
    gpu.destroy();
  });
});
