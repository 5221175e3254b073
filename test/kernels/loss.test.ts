import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import { hardCrossEntropy, softCrossEntropy, type GradMode } from '../../src/kernels/loss.ts';
import { eagle3Metrics, metricRatios } from '../../src/kernels/metrics.ts';
import { buildTeacher } from '../../src/kernels/teacher.ts';
import { hardCrossEntropyRef, metricSumsRef, shiftRowsRef, softCrossEntropyRef, teacherRef } from '../../src/reference/loss.ts';
import { Rng } from '../../src/util/random.ts';
import { chunked, randomMapping, randomMask, softmaxRows, teacherLogits } from './loss-data.ts';
import { assert, assertDeepEqual, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

interface TeacherOut {
  p: Tensor;
  pTilde: Tensor;
  tok: Tensor;
  positionMask: Tensor;
}

async function checkTeacher(
  gpu: Gpu,
  T: Float32Array,
  t2d: Int32Array,
  used: Int32Array,
  lm: Int32Array,
  rows: number,
  V: number,
  out: TeacherOut,
  logits: Tensor,
): Promise<number> {
  const D = used.length;
  const t2dT = gpu.upload([V], 'i32', t2d, 't2d');
  const usedT = gpu.upload([D], 'i32', used, 'used');
  const lmT = gpu.upload([rows], 'i32', lm, 'lossMask');
  gpu.write(logits, T);
  await buildTeacher(gpu, { logits, t2d: t2dT, used: usedT, lossMask: lmT, ...out }, { rows, vocab: V, draftVocab: D });
  const ref = teacherRef(T, t2d, used, lm, rows, V);
  assertDeepEqual(Array.from(await gpu.read(out.tok)), Array.from(ref.tok), 'tok (argmax, ties → lowest id)');
  assertDeepEqual(Array.from(await gpu.read(out.positionMask)), Array.from(ref.positionMask), 'positionMask');
  const e1 = assertRelClose(await gpu.read(out.p), ref.p, 1e-5, 'p');
  const e2 = assertRelClose(await gpu.read(out.pTilde), ref.pTilde, 1e-5, 'pTilde');
  gpu.release(t2dT, usedT, lmT);
  return Math.max(e1, e2);
}

export default defineSuite('kernels/loss', (t) => {
  t.test('teacher vs float64: ties, far-below draft columns, V not a multiple of 256', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(11);
    let worst = 0;
    for (const [rows, V, D] of [
      [37, 1000, 50],
      [5, 300, 300],
      [4, 20, 3],
    ]) {
      const { used, t2d } = randomMapping(rng, V, D);
      const T = teacherLogits(rng, rows, V, used);
      const lm = randomMask(rng, rows, 0.8);
      const out = {
        p: gpu.tensor([rows, D], 'f32', 'p'),
        pTilde: gpu.tensor([rows, D], 'f32', 'pTilde'),
        tok: gpu.tensor([rows], 'i32', 'tok'),
        positionMask: gpu.tensor([rows], 'i32', 'positionMask'),
      };
      const logits = gpu.tensor([rows, V], 'f32', 'logits');
      worst = Math.max(worst, await checkTeacher(gpu, T, t2d, used, lm, rows, V, out, logits));
      gpu.release(logits, out.p, out.pTilde, out.tok, out.positionMask);
    }
    note('worstRelErr', worst);
    gpu.destroy();
  });

  t.test('teacher over chunked logits and outputs (row segments)', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(12);
    const [rows, V, D] = [23, 700, 40];
    const { used, t2d } = randomMapping(rng, V, D);
    const T = teacherLogits(rng, rows, V, used);
    const lm = randomMask(rng, rows, 0.7);
    const logits = chunked(gpu, [rows, V], 'f32', [7, 9, 7], 'logits');
    const out = {
      p: chunked(gpu, [rows, D], 'f32', [12, 11], 'p'),
      pTilde: chunked(gpu, [rows, D], 'f32', [3, 20], 'pTilde'),
      tok: gpu.tensor([rows], 'i32', 'tok'),
      positionMask: chunked(gpu, [rows], 'i32', [10, 13], 'positionMask'),
    };
    note('relErr', await checkTeacher(gpu, T, t2d, used, lm, rows, V, out, logits));
    gpu.release(logits, out.p, out.pTilde, out.tok, out.positionMask);
    gpu.destroy();
  });

  for (const grad of ['separate', 'in-place', 'none'] as GradMode[]) {
    t.test(`soft cross-entropy (grad ${grad}) vs float64 over TTT steps 0..3 and 9`, async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(21);
      const [B, S, D] = [3, 7, 300];
      const rows = B * S;
      const p = softmaxRows(rng.floats(rows * D, 3), rows, D);
      const pm = randomMask(rng, rows, 0.7);
      const P = gpu.upload([rows, D], 'f32', p, 'p');
      const PM = gpu.upload([B, S], 'i32', pm, 'positionMask');
      const lossOut = gpu.zeros([6], 'f32', 'lossOut');
      let gradWorst = 0;
      let total = 0;
      const wantLoss: number[] = [];
      const steps = [0, 1, 2, 3, 9];
      for (const [slot, k] of steps.entries()) {
        const z = rng.floats(rows * D, 2);
        const Z = gpu.upload([B, S, D], 'f32', z, 'logits');
        const G = grad === 'separate' ? gpu.tensor([rows, D], 'f32', 'dlogits') : undefined;
        const gradScale = 0.8 ** k / 2;
        const weight = 0.8 ** k;
        await softCrossEntropy(
          gpu,
          { logits: Z, p: P, positionMask: PM, dlogits: G, lossOut },
          {
            rows,
            draftVocab: D,
            seqLen: S,
            step: k,
            grad,
            gradScale,
            slot,
            total: { slot: 5, weight, accumulate: slot > 0 },
          },
        );
        const ps = shiftRowsRef(p, rows, D, S, k, 1 / D);
        const ms = shiftRowsRef(pm, rows, 1, S, k, 0);
        const ref = softCrossEntropyRef(z, ps, ms, rows, D, rows, gradScale);
        total += weight * ref.loss;
        wantLoss.push(ref.loss);
        if (grad !== 'none') gradWorst = Math.max(gradWorst, assertRelClose(await gpu.read(G ?? Z), ref.grad, 1e-5, `grad step ${k}`));
        else assertDeepEqual(Array.from(await gpu.read(Z)), Array.from(z), `logits untouched with grad none (step ${k})`);
        gpu.release(Z, ...(G ? [G] : []));
      }
      const got = await gpu.read(lossOut);
      const lossErr = assertRelClose(got.slice(0, 4), wantLoss.slice(0, 4), 1e-5, 'per-step losses');
      const totalErr = assertRelClose([got[5]], [total], 1e-5, 'weighted total');
      assert(got[4] === 0, `step 9 ≥ S: every row is padding, loss must be exactly 0, got ${got[4]}`);
      if (grad !== 'none') note('gradRelErr', gradWorst);
      note('lossRelErr', Math.max(lossErr, totalErr));
      gpu.release(P, PM, lossOut);
      gpu.destroy();
    });
  }
  t.test('soft cross-entropy never reads logits of masked rows (NaN there stays out)', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(22);
    const [rows, D] = [6, 40];
    const p = softmaxRows(rng.floats(rows * D, 1), rows, D);
    const pm = Int32Array.from([1, 0, 1, 1, 0, 1]);
    const z = rng.floats(rows * D, 2);
    const clean = z.slice();
    for (const r of [1, 4]) z.fill(Number.NaN, r * D, (r + 1) * D);
    for (const r of [1, 4]) clean.fill(0, r * D, (r + 1) * D);
    const Z = gpu.upload([rows, D], 'f32', z, 'logits');
    const P = gpu.upload([rows, D], 'f32', p, 'p');
    const PM = gpu.upload([rows], 'i32', pm, 'positionMask');
    const out = gpu.zeros([1], 'f32', 'lossOut');
    await softCrossEntropy(
      gpu,
      { logits: Z, p: P, positionMask: PM, lossOut: out },
      { rows, draftVocab: D, seqLen: rows, step: 0, grad: 'in-place', slot: 0 },
    );
    const ref = softCrossEntropyRef(clean, p, pm, rows, D);
    const e1 = assertRelClose(await gpu.read(Z), ref.grad, 1e-5, 'gradient (zero on masked rows)');
    const e2 = assertRelClose(await gpu.read(out), [ref.loss], 1e-5, 'loss');
    note('worstRelErr', Math.max(e1, e2));
    gpu.release(Z, P, PM, out);
    gpu.destroy();
  });

  t.test('soft cross-entropy and metrics over chunked tensors with the TTT shift crossing parts', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(31);
    const [B, S, D, V] = [4, 6, 70, 90];
    const rows = B * S;
    const { used } = randomMapping(rng, V, D);
    const p = softmaxRows(rng.floats(rows * D, 3), rows, D);
    const pTilde = p.map((x) => x * rng.uniform(0.2, 1));
    const tok = Int32Array.from({ length: rows }, (_, r) => (r % 2 === 0 ? used[rng.int(0, D)] : rng.int(0, V)));
    const lm = randomMask(rng, rows, 0.8);
    const pm = Int32Array.from(lm, (v, r) => (r % 4 === 3 ? 0 : v));
    // Part boundaries at rows 5, 11 (logits), 9, 17 (p), 13 (masks): none aligned with S = 6.
    const Z = chunked(gpu, [rows, D], 'f32', [5, 6, 13], 'logits');
    const G = chunked(gpu, [rows, D], 'f32', [14, 10], 'dlogits');
    const P = chunked(gpu, [rows, D], 'f32', [9, 8, 7], 'p');
    const Q = chunked(gpu, [rows, D], 'f32', [17, 7], 'pTilde');
    const TOK = chunked(gpu, [rows], 'i32', [13, 11], 'tok');
    const LM = chunked(gpu, [rows], 'i32', [2, 11, 11], 'lossMask');
    const PM = chunked(gpu, [rows], 'i32', [13, 11], 'positionMask');
    const USED = gpu.upload([D], 'i32', used, 'used');
    gpu.write(P, p);
    gpu.write(Q, pTilde);
    gpu.write(TOK, tok);
    gpu.write(LM, lm);
    gpu.write(PM, pm);
    const lossOut = gpu.zeros([4], 'f32', 'lossOut');
    const metricsOut = gpu.zeros([16], 'f32', 'metricsOut');
    let worst = 0;
    const wantLoss: number[] = [];
    const wantMetrics: number[] = [];
    for (let k = 0; k < 4; k++) {
      const z = rng.floats(rows * D, 2);
      gpu.write(Z, z);
      await eagle3Metrics(
        gpu,
        { logits: Z, pTilde: Q, tok: TOK, lossMask: LM, positionMask: PM, used: USED, metricsOut },
        { rows, draftVocab: D, seqLen: S, step: k, slot: k },
      );
      await softCrossEntropy(
        gpu,
        { logits: Z, p: P, positionMask: PM, dlogits: G, lossOut },
        { rows, draftVocab: D, seqLen: S, step: k, grad: 'separate', slot: k },
      );
      const pmS = shiftRowsRef(pm, rows, 1, S, k, 0);
      const ref = softCrossEntropyRef(z, shiftRowsRef(p, rows, D, S, k, 1 / D), pmS, rows, D);
      wantLoss.push(ref.loss);
      worst = Math.max(worst, assertRelClose(await gpu.read(G), ref.grad, 1e-5, `grad step ${k}`));
      const m = metricSumsRef(
        z,
        shiftRowsRef(pTilde, rows, D, S, k, 0),
        shiftRowsRef(tok, rows, 1, S, k, 0),
        shiftRowsRef(lm, rows, 1, S, k, 0),
        pmS,
        used,
        rows,
      );
      wantMetrics.push(m.correct, m.denom, m.acceptSum, m.acceptCount);
    }
    worst = Math.max(worst, assertRelClose(await gpu.read(lossOut), wantLoss, 1e-5, 'losses'));
    worst = Math.max(worst, assertRelClose(await gpu.read(metricsOut), wantMetrics, 1e-5, 'metric sums'));
    note('worstRelErr', worst);
    gpu.release(Z, G, P, Q, TOK, LM, PM, USED, lossOut, metricsOut);
    gpu.destroy();
  });

  t.test('metrics vs float64: argmax ties, masks, accumulate', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(41);
    const [B, S, D, V] = [2, 9, 260, 600];
    const rows = B * S;
    const { used } = randomMapping(rng, V, D);
    const pTilde = softmaxRows(rng.floats(rows * D, 2), rows, D).map((x) => x * 0.7);
    const z = rng.floats(rows * D, 1);
    const tok = new Int32Array(rows);
    for (let r = 0; r < rows; r++) {
      // Tie between draft ids a < b: the prediction must be `a`; half of the rows label it correct.
      const a = rng.int(0, D - 1);
      const b = rng.int(a + 1, D);
      z[r * D + a] = 3;
      z[r * D + b] = 3;
      tok[r] = r % 2 === 0 ? used[a] : used[b];
    }
    const lm = randomMask(rng, rows, 0.8);
    const pm = Int32Array.from(lm, (v, r) => (r % 3 === 0 ? 0 : v));
    const Z = gpu.upload([rows, D], 'f32', z, 'logits');
    const Q = gpu.upload([rows, D], 'f32', pTilde, 'pTilde');
    const TOK = gpu.upload([rows], 'i32', tok, 'tok');
    const LM = gpu.upload([rows], 'i32', lm, 'lossMask');
    const PM = gpu.upload([rows], 'i32', pm, 'positionMask');
    const USED = gpu.upload([D], 'i32', used, 'used');
    const out = gpu.zeros([8], 'f32', 'metricsOut');
    const want: number[] = [0, 0, 0, 0, 0, 0, 0, 0];
    for (const k of [0, 2]) {
      // Slot 1 accumulates steps 0 and 2; slot 0 holds step 0 alone.
      const args = { logits: Z, pTilde: Q, tok: TOK, lossMask: LM, positionMask: PM, used: USED, metricsOut: out };
      if (k === 0) await eagle3Metrics(gpu, args, { rows, draftVocab: D, seqLen: S, step: k, slot: 0 });
      await eagle3Metrics(gpu, args, { rows, draftVocab: D, seqLen: S, step: k, slot: 1, accumulate: k > 0 });
      const sh = (x: ArrayLike<number>, w: number, pad: number): Float64Array => shiftRowsRef(x, rows, w, S, k, pad);
      const m = metricSumsRef(z, sh(pTilde, D, 0), sh(tok, 1, 0), sh(lm, 1, 0), sh(pm, 1, 0), used, rows);
      const v = [m.correct, m.denom, m.acceptSum, m.acceptCount];
      for (let i = 0; i < 4; i++) {
        if (k === 0) want[i] = v[i];
        want[4 + i] += v[i];
      }
    }
    const got = await gpu.read(out);
    assert(want[0] > 0 && want[0] < want[1], `test data should give some but not all hits (correct ${want[0]} of ${want[1]})`);
    for (const i of [0, 1, 3, 4, 5, 7]) assert(got[i] === want[i], `metric count ${i}: got ${got[i]}, want ${want[i]}`);
    note('relErr', assertRelClose(got, want, 1e-6, 'metric sums'));
    const ratios = metricRatios(got, 0);
    assertRelClose([ratios.acc, ratios.acceptanceRate], [want[0] / want[1], want[2] / want[3]], 1e-6, 'ratios');
    gpu.release(Z, Q, TOK, LM, PM, USED, out);
    gpu.destroy();
  });

  for (const grad of ['separate', 'in-place'] as GradMode[]) {
    t.test(
      `hard cross-entropy (grad ${grad}) vs float64: ignored labels, GPU count, fixed denominator, chunked logits`,
      async ({ gpu: ctx, note }) => {
        const gpu = new Gpu(ctx);
        const rng = new Rng(51);
        const [rows, V] = [19, 777];
        const labels = Int32Array.from({ length: rows }, (_, r) => (r % 4 === 1 ? -1 : r % 7 === 3 ? -100 : rng.int(0, V)));
        const LAB = gpu.upload([rows], 'i32', labels, 'labels');
        const lossOut = gpu.zeros([4], 'f32', 'lossOut');
        let worst = 0;
        const want: number[] = [];
        for (const [slot, denominator] of [
          [0, undefined],
          [2, 40],
        ] as const) {
          const x = rng.floats(rows * V, 5);
          const X = chunked(gpu, [rows, V], 'f32', [8, 11], 'logits');
          gpu.write(X, x);
          const G = grad === 'separate' ? chunked(gpu, [rows, V], 'f32', [5, 14], 'dlogits') : undefined;
          await hardCrossEntropy(
            gpu,
            { logits: X, labels: LAB, dlogits: G, lossOut },
            { rows, vocab: V, grad, gradScale: 0.5, denominator, slot },
          );
          const ref = hardCrossEntropyRef(x, labels, rows, V, denominator, 0.5);
          want.push(ref.loss, ref.count);
          worst = Math.max(worst, assertRelClose(await gpu.read(G ?? X), ref.grad, 1e-5, `grad (denominator ${denominator ?? 'count'})`));
          gpu.release(X, ...(G ? [G] : []));
        }
        const got = await gpu.read(lossOut);
        assert(got[1] === want[1] && got[3] === want[3], `label counts: got ${got[1]}, ${got[3]}, want ${want[1]}`);
        worst = Math.max(worst, assertRelClose(got, want, 1e-5, 'losses'));
        note('worstRelErr', worst);
        gpu.release(LAB, lossOut);
        gpu.destroy();
      },
    );
  }

  t.test('hard cross-entropy: a label ≥ V poisons the loss with NaN', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const X = gpu.upload([2, 8], 'f32', new Float32Array(16).fill(0.5), 'logits');
    const LAB = gpu.upload([2], 'i32', [3, 8], 'labels');
    const out = gpu.zeros([2], 'f32', 'lossOut');
    await hardCrossEntropy(gpu, { logits: X, labels: LAB, lossOut: out }, { rows: 2, vocab: 8, grad: 'none', slot: 0 });
    const got = await gpu.read(out);
    assert(Number.isNaN(got[0]), `loss with a corrupt label should be NaN, got ${got[0]}`);
    gpu.release(X, LAB, out);
    gpu.destroy();
  });

  t.test('bad inputs are rejected with errors naming the tensor', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const f32 = (shape: number[], label: string): Tensor => gpu.tensor(shape, 'f32', label);
    const i32 = (shape: number[], label: string): Tensor => gpu.tensor(shape, 'i32', label);
    const teacher = {
      logits: f32([6, 10], 'T'),
      t2d: i32([10], 't2d'),
      used: i32([4], 'used'),
      lossMask: i32([6], 'lm'),
      p: f32([6, 4], 'p'),
      pTilde: f32([6, 4], 'q'),
      tok: i32([6], 'tok'),
      positionMask: i32([6], 'pm'),
    };
    const shape = { rows: 6, vocab: 10, draftVocab: 4 };
    await assertRejects(
      () => buildTeacher(gpu, { ...teacher, logits: f32([6, 9], 'T9') }, shape),
      /logits \(T9\) has shape \[6, 9\]/,
      'logits width',
    );
    await assertRejects(() => buildTeacher(gpu, { ...teacher, t2d: f32([10], 'tf') }, shape), /t2d \(tf\) must be i32/, 't2d dtype');
    await assertRejects(
      () => buildTeacher(gpu, { ...teacher, pTilde: teacher.p }, shape),
      /pTilde and p share a GPU buffer/,
      'aliased outputs',
    );
    await assertRejects(() => buildTeacher(gpu, teacher, { ...shape, draftVocab: 11 }), /draftVocab 11 exceeds vocab 10/, 'D > V');
    const lossOut = f32([2], 'out');
    const soft = { logits: f32([6, 4], 'z'), p: teacher.p, positionMask: teacher.positionMask, lossOut };
    const opts = { rows: 6, draftVocab: 4, seqLen: 3, step: 1, grad: 'none' as GradMode, slot: 0 };
    await assertRejects(() => softCrossEntropy(gpu, soft, { ...opts, seqLen: 4 }), /rows 6 is not a multiple of seqLen 4/, 'seqLen');
    await assertRejects(() => softCrossEntropy(gpu, soft, { ...opts, grad: 'separate' }), /needs a dlogits tensor/, 'missing dlogits');
    await assertRejects(
      () => softCrossEntropy(gpu, { ...soft, dlogits: soft.logits }, { ...opts, grad: 'separate' }),
      /use grad 'in-place'/,
      'dlogits = logits',
    );
    await assertRejects(() => softCrossEntropy(gpu, soft, { ...opts, slot: 2 }), /slot 2 does not fit lossOut \(out/, 'slot');
    await assertRejects(
      () => softCrossEntropy(gpu, { ...soft, positionMask: f32([6], 'pmf') }, opts),
      /positionMask \(pmf\) must be i32/,
      'mask dtype',
    );
    await assertRejects(
      () =>
        hardCrossEntropy(gpu, { logits: teacher.logits, labels: f32([6], 'labf'), lossOut }, { rows: 6, vocab: 10, grad: 'none', slot: 0 }),
      /labels \(labf\) must be i32/,
      'labels dtype',
    );
    await assertRejects(
      () => hardCrossEntropy(gpu, { logits: teacher.logits, labels: teacher.tok, lossOut }, { rows: 6, vocab: 10, grad: 'none', slot: 1 }),
      /slot and slot \+ 1/,
      'hard slot',
    );
    await assertRejects(
      () =>
        eagle3Metrics(
          gpu,
          {
            logits: soft.logits,
            pTilde: teacher.pTilde,
            tok: teacher.tok,
            lossMask: teacher.lossMask,
            positionMask: teacher.positionMask,
            used: i32([5], 'used5'),
            metricsOut: f32([4], 'mo'),
          },
          { rows: 6, draftVocab: 4, seqLen: 3, step: 0, slot: 0 },
        ),
      /used \(used5\) has shape \[5\]; expected 4 elements/,
      'used length',
    );
    gpu.destroy();
  });
});
