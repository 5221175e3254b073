import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { adamwRef, clipCoefRef, globalNormRef } from '../../src/reference/optim.ts';
import { assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('reference/optim', (t) => {
  t.test('float64 norm, clip and AdamW reproduce the SpecForge fixture (both variants)', async ({ fixture, note }) => {
    const file = new SafetensorsFile(await fixture('eagle3/eagle3_reference.safetensors'), 'eagle3_reference');
    let worst = 0;
    for (const variant of ['', 'strong.']) {
      const names = file.names.filter((n) => n.startsWith(`${variant}grad.`)).map((n) => n.slice(`${variant}grad.`.length));
      const grads = names.map((n) => file.f32(`${variant}grad.${n}`));
      const norm = globalNormRef(grads);
      worst = Math.max(worst, assertRelClose([norm], file.f32(`${variant}grad_norm_preclip`), 1e-6, `${variant}grad_norm_preclip`));
      const coef = clipCoefRef(norm, 0.5);
      names.forEach((n, i) => {
        const g = Array.from(grads[i], (v) => v * coef);
        worst = Math.max(worst, assertRelClose(g, file.f32(`${variant}grad_clipped.${n}`), 1e-6, `${variant}grad_clipped.${n}`));
        const zeros = new Float64Array(g.length);
        const step = adamwRef(file.f32(`${variant}param.${n}`), g, zeros, zeros, {
          lr: 1e-3,
          beta1: 0.9,
          beta2: 0.95,
          eps: 1e-8,
          weightDecay: 0.01,
          step: 1,
        });
        worst = Math.max(worst, assertRelClose(step.param, file.f32(`${variant}after_step.${n}`), 1e-6, `${variant}after_step.${n}`));
      });
    }
    note('worstRelErr', worst);
  });
});
