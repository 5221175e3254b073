/**
 * The compact-feature teacher (src/kernels/teacher.ts): loss/target-stats (the full-vocabulary
 * logsumexp and argmax a rollout keeps of each row) and loss/teacher-pruned (p, p̃ and the position
 * mask from the draft columns' logits and those two statistics) against their float64 references,
 * in every row layout this device runs, plain and over split tensors; and the pair against
 * buildTeacher on the full logits: the same p, p̃, tok and position mask, bit for bit.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { LOSS_ROW_GEOMETRY } from '../../src/kernels/loss-rows.ts';
import { availableRowVariants, rowDeviceFacts } from '../../src/kernels/row-variant.ts';
import { buildTeacher, buildTeacherPruned, targetStats } from '../../src/kernels/teacher.ts';
import { targetStatsRef, teacherPrunedRef } from '../../src/reference/loss.ts';
import { Rng } from '../../src/util/random.ts';
import { assertDeepEqual, assertRejects, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { chunked, randomMapping, randomMask, teacherLogits } from './loss-data.ts';

/** The draft columns of full logits T [rows, V]: Z [rows, D] = T[:, used]. */
function draftColumns(T: Float32Array, rows: number, V: number, used: Int32Array): Float32Array {
  const D = used.length;
  const z = new Float32Array(rows * D);
  for (let r = 0; r < rows; r++) for (let d = 0; d < D; d++) z[r * D + d] = T[r * V + used[d]];
  return z;
}

export default defineSuite('kernels/teacher', (t) => {
  t.test('target stats and the pruned teacher vs float64, every row layout, plain and split', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(21);
    const variants = availableRowVariants('loss', LOSS_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx));
    let worst = 0;
    try {
      for (const [rows, V, D] of [
        [37, 1000, 50],
        [23, 700, 40],
        [4, 20, 3],
      ]) {
        const { used, t2d } = randomMapping(rng, V, D);
        const T = teacherLogits(rng, rows, V, used);
        const lm = randomMask(rng, rows, 0.8);
        const stats = targetStatsRef(T, rows, V);
        // Rows whose argmax is unknown (-1) or outside the vocabulary never get a position mask.
        const tok = Int32Array.from(stats.tok, (v, r) => (r === 1 ? -1 : r === 2 ? V + 5 : v));
        const z = draftColumns(T, rows, V, used);
        const ref = teacherPrunedRef(z, stats.lse, tok, t2d, lm, rows, D);
        for (const variant of variants) {
          for (const split of [false, true]) {
            const parts = (n: number) => (split ? [Math.ceil(n / 3), n - Math.ceil(n / 3)] : [n]);
            const logits = split ? chunked(gpu, [rows, V], 'f32', parts(rows), 'T') : gpu.tensor([rows, V], 'f32', 'T');
            const lse = split ? chunked(gpu, [rows], 'f32', parts(rows), 'lse') : gpu.tensor([rows], 'f32', 'lse');
            const tokT = gpu.tensor([rows], 'i32', 'tok');
            gpu.write(logits, T);
            await targetStats(gpu, { logits, lse, tok: tokT }, { rows, vocab: V }, { variant });
            const tag = `${rows}x${V} ${variant}${split ? ' split' : ''}`;
            assertDeepEqual(Array.from(await gpu.read(tokT)), Array.from(stats.tok), `${tag}: argmax (ties → lowest id)`);
            worst = Math.max(worst, assertRelClose(await gpu.read(lse), stats.lse, 1e-6, `${tag}: logsumexp`));

            const Z = split ? chunked(gpu, [rows, D], 'f32', parts(rows), 'Z') : gpu.tensor([rows, D], 'f32', 'Z');
            gpu.write(Z, z);
            gpu.write(lse, stats.lse);
            gpu.write(tokT, tok);
            const out = {
              p: split ? chunked(gpu, [rows, D], 'f32', parts(rows).reverse(), 'p') : gpu.tensor([rows, D], 'f32', 'p'),
              pTilde: gpu.tensor([rows, D], 'f32', 'pTilde'),
              positionMask: gpu.tensor([rows], 'i32', 'positionMask'),
            };
            const t2dT = gpu.upload([V], 'i32', t2d, 't2d');
            const lmT = gpu.upload([rows], 'i32', lm, 'lossMask');
            await buildTeacherPruned(
              gpu,
              { logits: Z, lse, tok: tokT, t2d: t2dT, lossMask: lmT, ...out },
              { rows, vocab: V, draftVocab: D },
              { variant },
            );
            assertDeepEqual(Array.from(await gpu.read(out.positionMask)), Array.from(ref.positionMask), `${tag}: position mask`);
            worst = Math.max(worst, assertRelClose(await gpu.read(out.p), ref.p, 1e-5, `${tag}: p`));
            worst = Math.max(worst, assertRelClose(await gpu.read(out.pTilde), ref.pTilde, 1e-5, `${tag}: p̃`));
            gpu.release(logits, lse, tokT, Z, out.p, out.pTilde, out.positionMask, t2dT, lmT);
          }
        }
      }
      note('worstRelErr', worst);
    } finally {
      gpu.destroy();
    }
  });

  t.test('target stats then the pruned teacher = the teacher of the full logits, bit for bit', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(22);
    const [rows, V, D] = [29, 900, 60];
    try {
      for (const variant of availableRowVariants('loss', LOSS_ROW_GEOMETRY, ctx.features, rowDeviceFacts(ctx))) {
        const { used, t2d } = randomMapping(rng, V, D);
        const T = teacherLogits(rng, rows, V, used);
        const lm = randomMask(rng, rows, 0.7);
        const logits = gpu.upload([rows, V], 'f32', T, 'T');
        const t2dT = gpu.upload([V], 'i32', t2d, 't2d');
        const usedT = gpu.upload([D], 'i32', used, 'used');
        const lmT = gpu.upload([rows], 'i32', lm, 'lossMask');
        const full = {
          p: gpu.tensor([rows, D], 'f32', 'p'),
          pTilde: gpu.tensor([rows, D], 'f32', 'pTilde'),
          tok: gpu.tensor([rows], 'i32', 'tok'),
          positionMask: gpu.tensor([rows], 'i32', 'pm'),
        };
        await buildTeacher(gpu, { logits, t2d: t2dT, used: usedT, lossMask: lmT, ...full }, { rows, vocab: V, draftVocab: D }, { variant });
        const lse = gpu.tensor([rows], 'f32', 'lse');
        const tok = gpu.tensor([rows], 'i32', 'tok2');
        await targetStats(gpu, { logits, lse, tok }, { rows, vocab: V }, { variant });
        const Z = gpu.upload([rows, D], 'f32', draftColumns(T, rows, V, used), 'Z');
        const pruned = {
          p: gpu.tensor([rows, D], 'f32', 'p2'),
          pTilde: gpu.tensor([rows, D], 'f32', 'pTilde2'),
          positionMask: gpu.tensor([rows], 'i32', 'pm2'),
        };
        await buildTeacherPruned(
          gpu,
          { logits: Z, lse, tok, t2d: t2dT, lossMask: lmT, ...pruned },
          { rows, vocab: V, draftVocab: D },
          { variant },
        );
        for (const [name, a, b] of [
          ['tok', full.tok, tok],
          ['p', full.p, pruned.p],
          ['pTilde', full.pTilde, pruned.pTilde],
          ['positionMask', full.positionMask, pruned.positionMask],
        ] as const)
          if (!sameBits(await gpu.read(a), await gpu.read(b))) throw new Error(`${variant}: ${name} differs from the full-logits teacher`);
        gpu.release(logits, t2dT, usedT, lmT, ...Object.values(full), lse, tok, Z, ...Object.values(pruned));
      }
    } finally {
      gpu.destroy();
    }
  });

  t.test('bad inputs are refused naming the tensor', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    try {
      const T = gpu.tensor([4, 10], 'f32', 'T');
      const lse = gpu.tensor([4], 'f32', 'lse');
      const tok = gpu.tensor([4], 'f32', 'tokF');
      await assertRejects(
        () => targetStats(gpu, { logits: T, lse, tok }, { rows: 4, vocab: 10 }),
        /targetStats: tok \(tokF\) must be i32/,
        'tok dtype',
      );
      const tokI = gpu.tensor([4], 'i32', 'tok');
      const Z = gpu.tensor([4, 3], 'f32', 'Z');
      const small = {
        p: gpu.tensor([4, 3], 'f32', 'p'),
        pTilde: gpu.tensor([4, 3], 'f32', 'q'),
        positionMask: gpu.tensor([4], 'i32', 'pm'),
      };
      const t2d = gpu.tensor([9], 'i32', 't2d');
      const lm = gpu.tensor([4], 'i32', 'lm');
      await assertRejects(
        () => buildTeacherPruned(gpu, { logits: Z, lse, tok: tokI, t2d, lossMask: lm, ...small }, { rows: 4, vocab: 10, draftVocab: 3 }),
        /buildTeacherPruned: t2d \(t2d\) has shape \[9\]; expected 10 elements/,
        't2d length',
      );
      gpu.release(T, lse, tok, tokI, Z, small.p, small.pTilde, small.positionMask, t2d, lm);
    } finally {
      gpu.destroy();
    }
  });
});
