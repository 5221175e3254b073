/**
 * Fixture parity with SpecForge (fixtures/eagle3, both variants): the GPU teacher from the target
 * logits, then per TTT step the metric sums and the soft cross-entropy from the recorded draft
 * logits, against plosses, acces, acceptance_rates and total_loss.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { softCrossEntropy } from '../../src/kernels/loss.ts';
import { eagle3Metrics, metricRatios } from '../../src/kernels/metrics.ts';
import { buildTeacher } from '../../src/kernels/teacher.ts';
import { eagle3StepRef, teacherRef } from '../../src/reference/loss.ts';
import { usedFromD2t } from '../../src/model/eagle3/vocab-mapping.ts';
import { assertDeepEqual, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('kernels/loss-fixture', (t) => {
  for (const prefix of ['', 'strong.']) {
    t.test(
      `fixture parity (${prefix || 'main'}): teacher, plosses, acces, acceptance_rates, total_loss`,
      async ({ gpu: ctx, fixture, note }) => {
        const gpu = new Gpu(ctx);
        const f = new SafetensorsFile(await fixture('eagle3/eagle3_reference.safetensors'), 'eagle3_reference');
        const [B, S, V] = f.shape(`${prefix}target`) as [number, number, number];
        const rows = B * S;
        const L = f.shape(`${prefix}plosses`)[0];
        const used = usedFromD2t(f.i32('d2t'), V);
        const D = used.length;
        const logits = gpu.upload([B, S, V], 'f32', f.f32(`${prefix}target`), 'target');
        const t2d = gpu.upload([V], 'i32', f.i32('t2d'), 't2d');
        const usedT = gpu.upload([D], 'i32', used, 'used');
        const lossMask = gpu.upload([B, S, 1], 'i32', f.i32('loss_mask'), 'loss_mask');
        const p = gpu.tensor([B, S, D], 'f32', 'p');
        const pTilde = gpu.tensor([B, S, D], 'f32', 'pTilde');
        const tok = gpu.tensor([B, S], 'i32', 'tok');
        const positionMask = gpu.tensor([B, S], 'i32', 'positionMask');
        await buildTeacher(gpu, { logits, t2d, used: usedT, lossMask, p, pTilde, tok, positionMask }, { rows, vocab: V, draftVocab: D });
        let worst: number;
        const ref = teacherRef(f.f32(`${prefix}target`), f.i32('t2d'), used, f.i32('loss_mask'), rows, V);
        if (f.has(`${prefix}derived.target_p`)) {
          worst = assertRelClose(await gpu.read(p), f.f32(`${prefix}derived.target_p`), 1e-5, 'derived.target_p');
          assertDeepEqual(
            Array.from(await gpu.read(positionMask)),
            Array.from(f.i32(`${prefix}derived.position_mask`)),
            'derived.position_mask',
          );
        } else {
          // No stored teacher for this variant: the float64 teacher, itself checked on `main`, stands in.
          worst = assertRelClose(await gpu.read(p), ref.p, 1e-5, 'target_p vs float64');
          assertDeepEqual(Array.from(await gpu.read(positionMask)), Array.from(ref.positionMask), 'position_mask vs float64');
        }
        const lossOut = gpu.zeros([L + 1], 'f32', 'lossOut');
        const metricsOut = gpu.zeros([4 * L], 'f32', 'metricsOut');
        for (let k = 0; k < L; k++) {
          const z = gpu.upload([B, S, D], 'f32', f.f32(`${prefix}step_logits.${k}`), `step_logits.${k}`);
          await eagle3Metrics(
            gpu,
            { logits: z, pTilde, tok, lossMask, positionMask, used: usedT, metricsOut },
            { rows, draftVocab: D, seqLen: S, step: k, slot: k },
          );
          await softCrossEntropy(
            gpu,
            { logits: z, p, positionMask, lossOut },
            {
              rows,
              draftVocab: D,
              seqLen: S,
              step: k,
              grad: 'in-place',
              gradScale: 0.8 ** k,
              slot: k,
              total: { slot: L, weight: 0.8 ** k, accumulate: k > 0 },
            },
          );
          gpu.release(z);
        }
        const losses = await gpu.read(lossOut);
        const sums = await gpu.read(metricsOut);
        const acc = Array.from({ length: L }, (_, k) => metricRatios(sums, k).acc);
        const rate = Array.from({ length: L }, (_, k) => metricRatios(sums, k).acceptanceRate);
        const e1 = assertRelClose(losses.slice(0, L), f.f32(`${prefix}plosses`), 1e-5, 'plosses');
        const e2 = assertRelClose(acc, f.f32(`${prefix}acces`), 1e-5, 'acces');
        const e3 = assertRelClose(rate, f.f32(`${prefix}acceptance_rates`), 1e-5, 'acceptance_rates');
        const e4 = assertRelClose([losses[L]], f.f32(`${prefix}total_loss`), 1e-5, 'total_loss');
        // The float64 path agrees as well (same formulas, independent implementation).
        for (let k = 0; k < L; k++) {
          const r = eagle3StepRef(ref, f.f32(`${prefix}step_logits.${k}`), f.i32('loss_mask'), used, rows, S, k);
          assertRelClose(
            [r.ploss, r.acceptanceRate],
            [f.f32(`${prefix}plosses`)[k], f.f32(`${prefix}acceptance_rates`)[k]],
            1e-6,
            `float64 step ${k}`,
          );
        }
        note('teacherRelErr', worst);
        note('plossRelErr', e1);
        note('accRelErr', e2);
        note('acceptRelErr', e3);
        note('totalRelErr', e4);
        gpu.release(logits, t2d, usedT, lossMask, p, pTilde, tok, positionMask, lossOut, metricsOut);
        gpu.destroy();
      },
    );
  }
});
