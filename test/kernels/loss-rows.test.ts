/**
 * The row layouts of the loss family (src/kernels/loss-rows.ts, row-variant.ts): every variant this
 * device runs — teacher, soft cross-entropy (both gradient modes), metrics and hard cross-entropy —
 * against the float64 references at row widths 128, 1024 and 300, over chunked tensors with the TTT
 * shift, and the subgroup variant bit-identical to `rows` (or refused with its reason).
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import { hardCrossEntropy, softCrossEntropy, type GradMode } from '../../src/kernels/loss.ts';
import { LOSS_ROW_GEOMETRY, rowSegments } from '../../src/kernels/loss-rows.ts';
import { eagle3Metrics } from '../../src/kernels/metrics.ts';
import { availableRowVariants, rowDeviceFacts, type RowVariant } from '../../src/kernels/row-variant.ts';
import { buildTeacher } from '../../src/kernels/teacher.ts';
import { hardCrossEntropyRef, metricSumsRef, shiftRowsRef, softCrossEntropyRef, teacherRef } from '../../src/reference/loss.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { chunked, randomMapping, randomMask, teacherLogits } from './loss-data.ts';

const [B, S, K] = [3, 7, 2]; // 21 rows; TTT step 2 shifts inside each sequence of 7
const ROWS = B * S;

/** Everything one pass over the four kernels produces, read back. */
interface LossOutputs {
  tok: Int32Array;
  positionMask: Int32Array;
  p: Float32Array;
  pTilde: Float32Array;
  softGrad: Float32Array;
  softInPlace: Float32Array;
  hardGrad: Float32Array;
  lossOut: Float32Array;
  metricsOut: Float32Array;
}

interface LossInputs {
  V: number;
  D: number;
  used: Int32Array;
  t2d: Int32Array;
  T: Float32Array;
  lm: Int32Array;
  z: Float32Array;
  labels: Int32Array;
}

function makeInputs(rng: Rng, width: number): LossInputs {
  const [V, D] = [width, Math.max(3, Math.floor(width / 2) + 1)];
  const { used, t2d } = randomMapping(rng, V, D);
  const z = rng.floats(ROWS * D, 2);
  // A planted argmax tie in every third row (the lowest draft id must win).
  for (let r = 0; r < ROWS; r += 3) z[r * D + 1] = z[r * D + D - 1] = 7;
  const labels = Int32Array.from({ length: ROWS }, (_, r) => (r % 5 === 2 ? -100 : rng.int(0, V)));
  return { V, D, used, t2d, T: teacherLogits(rng, ROWS, V, used), lm: randomMask(rng, ROWS, 0.8), z, labels };
}

/** Run teacher → metrics → soft CE (separate, then in place) → hard CE in `variant`, with chunked tensors where `chunk`. */
async function runAll(gpu: Gpu, x: LossInputs, variant: RowVariant, chunk: boolean): Promise<LossOutputs> {
  const { V, D } = x;
  const rowsOf = (shape: number[], dtype: 'f32' | 'i32', counts: number[], label: string): Tensor =>
    chunk ? chunked(gpu, shape, dtype, counts, label) : gpu.tensor(shape, dtype, label);
  const T = rowsOf([ROWS, V], 'f32', [5, 9, 7], 'target');
  gpu.write(T, x.T);
  const t2d = gpu.upload([V], 'i32', x.t2d, 't2d');
  const used = gpu.upload([D], 'i32', x.used, 'used');
  const lossMask = rowsOf([B, S], 'i32', [1, 2], 'lossMask');
  gpu.write(lossMask, x.lm);
  const p = rowsOf([ROWS, D], 'f32', [11, 10], 'p');
  const pTilde = rowsOf([ROWS, D], 'f32', [4, 17], 'pTilde');
  const tok = gpu.tensor([ROWS], 'i32', 'tok');
  const positionMask = rowsOf([ROWS], 'i32', [13, 8], 'positionMask');
  await buildTeacher(
    gpu,
    { logits: T, t2d, used, lossMask, p, pTilde, tok, positionMask },
    { rows: ROWS, vocab: V, draftVocab: D },
    { variant },
  );

  const Z = rowsOf([ROWS, D], 'f32', [6, 6, 9], 'logits');
  gpu.write(Z, x.z);
  const G = rowsOf([ROWS, D], 'f32', [15, 6], 'dlogits');
  const lossOut = gpu.zeros([6], 'f32', 'lossOut');
  const metricsOut = gpu.zeros([4], 'f32', 'metricsOut');
  const steps = { rows: ROWS, draftVocab: D, seqLen: S, step: K, variant };
  await eagle3Metrics(gpu, { logits: Z, pTilde, tok, lossMask, positionMask, used, metricsOut }, { ...steps, slot: 0 });
  await softCrossEntropy(gpu, { logits: Z, p, positionMask, dlogits: G, lossOut }, { ...steps, grad: 'separate', gradScale: 0.5, slot: 0 });
  const softGrad = await gpu.read(G);
  await softCrossEntropy(gpu, { logits: Z, p, positionMask, lossOut }, { ...steps, grad: 'in-place' as GradMode, gradScale: 0.5, slot: 1 });
  const softInPlace = await gpu.read(Z);

  const X = rowsOf([ROWS, V], 'f32', [10, 11], 'hard-logits');
  gpu.write(X, x.T);
  const labels = gpu.upload([ROWS], 'i32', x.labels, 'labels');
  const HG = gpu.tensor([ROWS, V], 'f32', 'hard-dlogits');
  await hardCrossEntropy(gpu, { logits: X, labels, dlogits: HG, lossOut }, { rows: ROWS, vocab: V, grad: 'separate', slot: 2, variant });
  const out: LossOutputs = {
    tok: (await gpu.read(tok)) as Int32Array,
    positionMask: (await gpu.read(positionMask)) as Int32Array,
    p: (await gpu.read(p)) as Float32Array,
    pTilde: (await gpu.read(pTilde)) as Float32Array,
    softGrad: softGrad as Float32Array,
    softInPlace: softInPlace as Float32Array,
    hardGrad: (await gpu.read(HG)) as Float32Array,
    lossOut: (await gpu.read(lossOut)) as Float32Array,
    metricsOut: (await gpu.read(metricsOut)) as Float32Array,
  };
  gpu.release(T, t2d, used, lossMask, p, pTilde, tok, positionMask, Z, G, lossOut, metricsOut, X, labels, HG);
  return out;
}

/** Check one run against the float64 references; returns the worst relative error. */
function checkAll(x: LossInputs, got: LossOutputs, tag: string): number {
  const { V, D } = x;
  const ref = teacherRef(x.T, x.t2d, x.used, x.lm, ROWS, V);
  assertDeepEqual(Array.from(got.tok), Array.from(ref.tok), `${tag} teacher tok (ties → lowest id)`);
  assertDeepEqual(Array.from(got.positionMask), Array.from(ref.positionMask), `${tag} teacher positionMask`);
  let worst = assertRelClose(got.p, ref.p, 1e-5, `${tag} teacher p`);
  worst = Math.max(worst, assertRelClose(got.pTilde, ref.pTilde, 1e-5, `${tag} teacher pTilde`));
  // The kernels downstream read the GPU teacher, so the references do too.
  const sh = (a: ArrayLike<number>, w: number, pad: number): Float64Array => shiftRowsRef(a, ROWS, w, S, K, pad);
  const pmS = sh(got.positionMask, 1, 0);
  const soft = softCrossEntropyRef(x.z, sh(got.p, D, 1 / D), pmS, ROWS, D, ROWS, 0.5);
  worst = Math.max(worst, assertRelClose(got.softGrad, soft.grad, 1e-5, `${tag} soft CE gradient (separate)`));
  worst = Math.max(worst, assertRelClose(got.softInPlace, soft.grad, 1e-5, `${tag} soft CE gradient (in place)`));
  const m = metricSumsRef(x.z, sh(got.pTilde, D, 0), sh(got.tok, 1, 0), sh(x.lm, 1, 0), pmS, x.used, ROWS);
  worst = Math.max(worst, assertRelClose(got.metricsOut, [m.correct, m.denom, m.acceptSum, m.acceptCount], 1e-5, `${tag} metric sums`));
  const hard = hardCrossEntropyRef(x.T, x.labels, ROWS, V);
  worst = Math.max(worst, assertRelClose(got.hardGrad, hard.grad, 1e-5, `${tag} hard CE gradient`));
  worst = Math.max(worst, assertRelClose(got.lossOut.slice(0, 4), [soft.loss, soft.loss, hard.loss, hard.count], 1e-5, `${tag} losses`));
  return worst;
}

export default defineSuite('kernels/loss-rows', (t) => {
  t.test('every row variant of this device vs float64 at widths 128, 1024 and 300, plain and chunked', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(51);
    const variants = availableRowVariants('loss', LOSS_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx));
    note('variants', variants.join(' '));
    let worst = 0;
    for (const width of [128, 1024, 300]) {
      const x = makeInputs(rng, width);
      for (const variant of variants) {
        for (const chunk of [false, true]) {
          const tag = `${variant} width ${width}${chunk ? ' chunked' : ''}`;
          worst = Math.max(worst, checkAll(x, await runAll(gpu, x, variant, chunk), tag));
        }
      }
    }
    note('worstRelErr', worst);
    gpu.destroy();
  });

  t.test(
    'subgroup variant: bit-identical to rows where the device has subgroups, else refused with the reason',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const x = makeInputs(new Rng(52), 300);
      if (availableRowVariants('loss', LOSS_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx)).includes('subgroup')) {
        const [a, b] = [await runAll(gpu, x, 'rows', true), await runAll(gpu, x, 'subgroup', true)];
        for (const key of Object.keys(a) as (keyof LossOutputs)[]) {
          assert(
            Array.from(a[key]).every((v, i) => Object.is(v, b[key][i])),
            `${key}: rows and subgroup differ`,
          );
        }
        note('checked', 'bit-identical');
      } else {
        await assertRejects(
          () => runAll(gpu, x, 'subgroup', false),
          /buildTeacher: loss variant subgroup needs (the WebGPU feature "subgroups"|subgroups of at least)/,
          'refusal',
        );
        note('checked', 'refused');
      }
      gpu.destroy();
    },
  );

  t.test('row segments: one dispatch per run of equal bindings, a cut at each shifted part boundary', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const plain = gpu.tensor([ROWS, 4], 'f32', 'plain');
    const split = chunked(gpu, [ROWS, 4], 'f32', [8, 13], 'split');
    const spans = (segs: ReturnType<typeof rowSegments>) => segs.map((s) => [s.start, s.count]);
    // One part read at r + K: both sides of the shifted end bind that part, so one segment.
    assertDeepEqual(spans(rowSegments(ROWS, [{ tensor: plain, shift: K }, { tensor: plain }])), [[0, ROWS]], 'one part, shifted');
    // Parts [0, 8) and [8, 21) read at r + K: rows 0..5 read part 0; rows 6.. part 1 (the pad rows past the end too).
    assertDeepEqual(
      spans(rowSegments(ROWS, [{ tensor: split, shift: K }])),
      [
        [0, 8 - K],
        [8 - K, ROWS - 8 + K],
      ],
      'two parts, shifted',
    );
    // Unshifted split operand beside a shifted plain one: the cut is the split's own boundary.
    assertDeepEqual(
      spans(rowSegments(ROWS, [{ tensor: split }, { tensor: plain, shift: K }], { start: 2, count: 15 })),
      [
        [2, 6],
        [8, 9],
      ],
      'two parts in a range',
    );
    gpu.release(plain, split);
    gpu.destroy();
  });

  t.test('an unknown variant is refused naming the op', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const x = makeInputs(new Rng(53), 128);
    await assertRejects(
      () => runAll(gpu, x, 'tiled' as RowVariant, false),
      /buildTeacher: loss variant must be one of wide, rows, subgroup, got tiled/,
      'unknown variant',
    );
    gpu.destroy();
  });
});
