import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { Tensor, type TensorPart } from '../../src/gpu/tensor.ts';
import { adamwStep, clipGradients, globalGradNorm, gradNormWorkspaceSize, sumsqWorkgroups } from '../../src/kernels/optim.ts';
import { adamwRef, clipCoefRef, globalNormRef } from '../../src/reference/optim.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const FIXTURE_ADAMW = { lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.01, step: 1 };

/** A [rows, cols] f32 tensor split into row parts, as gpu.tensor does past one binding. */
function chunked(gpu: Gpu, partRows: number[], cols: number, data: ArrayLike<number>, label: string): Tensor {
  const parts: TensorPart[] = [];
  let rowStart = 0;
  for (const rowCount of partRows) {
    parts.push({ ...gpu.tensor([rowCount, cols], 'f32', label).part, rowStart, rowCount });
    rowStart += rowCount;
  }
  const t = new Tensor([rowStart, cols], 'f32', parts, label);
  gpu.write(t, data);
  return t;
}

export default defineSuite('kernels/optim', (t) => {
  for (const variant of ['', 'strong.']) {
    t.test(
      `fixture ${variant ? 'strong' : 'main'}: grad norm, clipped grads and AdamW step match SpecForge`,
      async ({ gpu: ctx, fixture, note }) => {
        const gpu = new Gpu(ctx);
        const file = new SafetensorsFile(await fixture('eagle3/eagle3_reference.safetensors'), 'eagle3_reference');
        const names = file.names.filter((n) => n.startsWith(`${variant}grad.`)).map((n) => n.slice(`${variant}grad.`.length));
        assert(names.length === 13 && !names.includes('embed_tokens.weight'), `expected 13 trainable parameters, got ${names.join(', ')}`);
        const grads = names.map((n) => gpu.upload(file.shape(`${variant}grad.${n}`), 'f32', file.f32(`${variant}grad.${n}`), `grad.${n}`));
        const partials = gpu.tensor([gradNormWorkspaceSize(grads)], 'f32', 'partials');
        const result = gpu.tensor([2], 'f32', 'result');
        await globalGradNorm(gpu, grads, partials, result, { maxNorm: 0.5 });

        // AdamW reads the clip coefficient on the GPU, from the unclipped gradients.
        const params = names.map((n) =>
          gpu.upload(file.shape(`${variant}param.${n}`), 'f32', file.f32(`${variant}param.${n}`), `param.${n}`),
        );
        const ms = names.map((n) => gpu.zeros(file.shape(`${variant}param.${n}`), 'f32', `m.${n}`));
        const vs = names.map((n) => gpu.zeros(file.shape(`${variant}param.${n}`), 'f32', `v.${n}`));
        for (let i = 0; i < names.length; i++) await adamwStep(gpu, params[i], grads[i], ms[i], vs[i], { ...FIXTURE_ADAMW, clip: result });
        await clipGradients(gpu, grads, result);

        const [norm] = await gpu.read(result);
        const normErr = assertRelClose([norm], file.f32(`${variant}grad_norm_preclip`), 1e-5, 'grad_norm_preclip');
        let worstClip = 0;
        let worstStep = 0;
        for (let i = 0; i < names.length; i++) {
          const n = names[i];
          worstClip = Math.max(
            worstClip,
            assertRelClose(await gpu.read(grads[i]), file.f32(`${variant}grad_clipped.${n}`), 1e-5, `grad_clipped.${n}`),
          );
          worstStep = Math.max(
            worstStep,
            assertRelClose(await gpu.read(params[i]), file.f32(`${variant}after_step.${n}`), 1e-5, `after_step.${n}`),
          );
        }
        note('gradNormRelErr', normErr);
        note('worstClippedRelErr', worstClip);
        note('worstAfterStepRelErr', worstStep);
        gpu.release(...grads, ...params, ...ms, ...vs, partials, result);
        gpu.destroy();
      },
    );
  }

  t.test(
    'global norm over odd sizes (one element per load) and multiples of 4 (optim/sumsq-vec4), row parts, vs float64; clip coefficient both sides of 1',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(51);
      const sizes = [1, 3, 257, 2049, 4096, 70001, 300000];
      const data = sizes.map((n, i) => rng.floats(n, 10 ** ((i % 3) - 1)));
      const grads = sizes.map((n, i) => gpu.upload([n], 'f32', data[i], `g${i}`));
      const split = rng.floats(37 * 11);
      grads.push(chunked(gpu, [5, 31, 1], 11, split, 'chunked'));
      data.push(split);
      const partials = gpu.tensor([gradNormWorkspaceSize(grads)], 'f32', 'partials');
      const result = gpu.tensor([2], 'f32', 'result');
      const want = globalNormRef(data);
      let worst = 0;
      for (const maxNorm of [want / 3, want * 2, Number.POSITIVE_INFINITY]) {
        await globalGradNorm(gpu, grads, partials, result, { maxNorm });
        const [norm, coef] = await gpu.read(result);
        worst = Math.max(
          worst,
          assertRelClose([norm, coef], [want, clipCoefRef(want, maxNorm)], 1e-5, `norm and coef, maxNorm ${maxNorm}`),
        );
        const again = await gpu.read(result);
        await globalGradNorm(gpu, grads, partials, result, { maxNorm });
        assertDeepEqual(Array.from(await gpu.read(result)), Array.from(again), 'norm is bitwise repeatable');
      }
      assertEqual(sumsqWorkgroups(300000), 19, 'workgroups for 300000 elements');
      await globalGradNorm(gpu, grads, partials, result, { maxNorm: want / 3 });
      await clipGradients(gpu, grads, result);
      for (let i = 0; i < grads.length; i++) {
        const scaled = Array.from(data[i], (v) => v * clipCoefRef(want, want / 3));
        worst = Math.max(worst, assertRelClose(await gpu.read(grads[i]), scaled, 1e-5, `clipped g${i}`));
      }
      note('worstRelErr', worst);
      gpu.release(...grads, partials, result);
      gpu.destroy();
    },
  );

  t.test('AdamW over three steps vs float64, with and without clipping, row parts', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const rng = new Rng(52);
    const [rows, cols] = [29, 37];
    const n = rows * cols;
    const opts = { lr: 3e-3, beta1: 0.8, beta2: 0.99, eps: 1e-6, weightDecay: 0.1 };
    let worst = 0;
    for (const clipped of [false, true]) {
      let p: ArrayLike<number> = rng.floats(n);
      let m: ArrayLike<number> = new Float64Array(n);
      let v: ArrayLike<number> = new Float64Array(n);
      const P = chunked(gpu, [10, 19], cols, p, 'param');
      const M = chunked(gpu, [10, 19], cols, new Float32Array(n), 'm');
      const V = chunked(gpu, [10, 19], cols, new Float32Array(n), 'v');
      const G = chunked(gpu, [10, 19], cols, new Float32Array(n), 'grad');
      const partials = gpu.tensor([gradNormWorkspaceSize([G])], 'f32', 'partials');
      const result = gpu.tensor([2], 'f32', 'result');
      for (let step = 1; step <= 3; step++) {
        const g = rng.floats(n, 0.1);
        g[step] = 0; // a zero gradient: the update is eps-limited, never NaN
        gpu.write(G, g);
        let gUsed: ArrayLike<number> = g;
        if (clipped) {
          await globalGradNorm(gpu, [G], partials, result, { maxNorm: 0.5 });
          const coef = clipCoefRef(globalNormRef([g]), 0.5);
          assert(coef < 1, 'the test gradient must actually be clipped');
          gUsed = Array.from(g, (x) => x * coef);
        }
        await adamwStep(gpu, P, G, M, V, { ...opts, step, clip: clipped ? result : undefined });
        ({ param: p, m, v } = adamwRef(p, gUsed, m, v, { ...opts, step }));
        const tag = `${clipped ? 'clipped' : 'unclipped'} step ${step}`;
        worst = Math.max(worst, assertRelClose(await gpu.read(P), p, 1e-5, `param ${tag}`));
        worst = Math.max(worst, assertRelClose(await gpu.read(M), m, 1e-5, `m ${tag}`));
        worst = Math.max(worst, assertRelClose(await gpu.read(V), v, 1e-5, `v ${tag}`));
      }
      gpu.release(P, M, V, G, partials, result);
    }
    note('worstRelErr', worst);
    gpu.destroy();
  });

  t.test(
    'AdamW four elements per invocation (optim/adamw-vec4) has the bits of the one-element kernel, and matches float64',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(54);
      // 4 · 301 elements in row parts of 400 and 804 go four at a time; one more element takes the
      // one-element kernel over the same leading values.
      const n = 4 * 301;
      const opts = { lr: 3e-3, beta1: 0.8, beta2: 0.99, eps: 1e-6, weightDecay: 0.1 };
      let worst = 0;
      for (const clipped of [false, true]) {
        const p0 = rng.floats(n + 1);
        const wide = ['param', 'm', 'v', 'grad'].map((label, i) =>
          chunked(gpu, [100, 201], 4, i === 0 ? p0.slice(0, n) : new Float32Array(n), label),
        );
        const narrow = ['param', 'm', 'v', 'grad'].map((label, i) =>
          gpu.upload([n + 1], 'f32', i === 0 ? p0 : new Float32Array(n + 1), `${label}+1`),
        );
        const partials = gpu.tensor([gradNormWorkspaceSize([wide[3]])], 'f32', 'partials');
        const result = gpu.tensor([2], 'f32', 'result');
        let [p, m, v]: ArrayLike<number>[] = [p0.slice(0, n), new Float64Array(n), new Float64Array(n)];
        for (let step = 1; step <= 2; step++) {
          const g = rng.floats(n + 1, 0.1);
          gpu.write(wide[3], g.slice(0, n));
          gpu.write(narrow[3], g);
          // The clip coefficient of the wide gradient clips both, so the two kernels see the same g.
          if (clipped) await globalGradNorm(gpu, [wide[3]], partials, result, { maxNorm: 0.5 });
          const coef = clipped ? clipCoefRef(globalNormRef([g.slice(0, n)]), 0.5) : 1;
          const clip = clipped ? result : undefined;
          await adamwStep(gpu, wide[0], wide[3], wide[1], wide[2], { ...opts, step, clip });
          await adamwStep(gpu, narrow[0], narrow[3], narrow[1], narrow[2], { ...opts, step, clip });
          ({
            param: p,
            m,
            v,
          } = adamwRef(
            p,
            Array.from(g.slice(0, n), (x) => x * coef),
            m,
            v,
            { ...opts, step },
          ));
          const tag = `${clipped ? 'clipped' : 'unclipped'} step ${step}`;
          for (const [i, name, want] of [
            [0, 'param', p],
            [1, 'm', m],
            [2, 'v', v],
          ] as const) {
            const got = await gpu.read(wide[i]);
            assertDeepEqual(Array.from(got), Array.from((await gpu.read(narrow[i])).subarray(0, n)), `${name} bits, ${tag}`);
            worst = Math.max(worst, assertRelClose(got, want, 1e-5, `${name} ${tag}`));
          }
        }
        gpu.release(...wide, ...narrow, partials, result);
      }
      note('worstRelErr', worst);
      gpu.destroy();
    },
  );

  t.test(
    'a NaN or infinite gradient norm skips the step in both AdamW kernels: weights and moments untouched, scaled gradients zero',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const rng = new Rng(53);
      const opts = { lr: 3e-3, beta1: 0.8, beta2: 0.99, eps: 1e-6, weightDecay: 0.1, step: 2 };
      // 300 elements go four per invocation (optim/adamw-vec4), 301 one per invocation.
      for (const [n, bad] of [
        [300, Number.NaN],
        [301, Number.POSITIVE_INFINITY],
        [300, Number.POSITIVE_INFINITY],
        [301, Number.NaN],
      ]) {
        const p = Float32Array.from(rng.floats(n));
        const m = Float32Array.from(rng.floats(n, 0.01));
        const v = Float32Array.from(rng.floats(n, 0.01), Math.abs);
        const g = Float32Array.from(rng.floats(n, 0.1));
        g[17] = bad;
        const [P, M, V, G] = [p, m, v, g].map((x, i) => gpu.upload([n], 'f32', x, ['param', 'm', 'v', 'grad'][i]));
        const partials = gpu.tensor([gradNormWorkspaceSize([G])], 'f32', 'partials');
        const result = gpu.tensor([2], 'f32', 'result');
        await globalGradNorm(gpu, [G], partials, result, { maxNorm: 0.5 });
        const [norm, coef] = await gpu.read(result);
        assert(!Number.isFinite(norm), `the norm is ${norm}`);
        assertEqual(coef, clipCoefRef(norm, 0.5), `skip sentinel for a ${bad} gradient`);
        await adamwStep(gpu, P, G, M, V, { ...opts, clip: result });
        assertDeepEqual([...(await gpu.read(P))], [...p], `weights untouched (${bad})`);
        assertDeepEqual([...(await gpu.read(M))], [...m], `first moments untouched (${bad})`);
        assertDeepEqual([...(await gpu.read(V))], [...v], `second moments untouched (${bad})`);
        await clipGradients(gpu, [G], result);
        assertDeepEqual([...(await gpu.read(G))], new Array(n).fill(0), `scaled gradients are zero (${bad})`);
        gpu.release(P, M, V, G, partials, result);
      }
      gpu.destroy();
    },
  );

  t.test('bad arguments name the tensor at fault', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const P = gpu.tensor([4, 3], 'f32', 'param');
    const G = gpu.tensor([4, 3], 'f32', 'grad');
    const Short = gpu.tensor([11], 'f32', 'short');
    const M = gpu.tensor([4, 3], 'f32', 'm');
    const V = gpu.tensor([4, 3], 'f32', 'v');
    const R = gpu.tensor([2], 'f32', 'result');
    const I = gpu.tensor([12], 'i32', 'ints');
    const opts = { ...FIXTURE_ADAMW };
    await assertRejects(
      () => adamwStep(gpu, P, Short, M, V, opts),
      /grad \(short \[11\]\) has 11 elements, needs at least 12/,
      'short grad',
    );
    await assertRejects(() => adamwStep(gpu, P, G, M, M, opts), /m \(m\) shares a GPU buffer with v/, 'm aliasing v');
    await assertRejects(() => adamwStep(gpu, P, G, M, V, { ...opts, step: 0 }), /step must be an integer ≥ 1/, 'step 0');
    await assertRejects(() => adamwStep(gpu, P, G, M, V, { ...opts, beta2: 1 }), /beta2 must be in \[0, 1\)/, 'beta2 1');
    await assertRejects(() => globalGradNorm(gpu, [G, I], Short, R, { maxNorm: 1 }), /grads\[1\] \(ints \[12\]\) must be f32/, 'i32 grad');
    await assertRejects(
      () => globalGradNorm(gpu, [G], R, R, { maxNorm: 1 }),
      /result \(result\) shares a GPU buffer with partials/,
      'result aliasing partials',
    );
    await assertRejects(() => globalGradNorm(gpu, [G], Short, R, { maxNorm: 0 }), /maxNorm must be > 0/, 'maxNorm 0');
    await assertRejects(() => clipGradients(gpu, [G], I), /result \(ints \[12\]\) must be f32/, 'i32 result');
    gpu.release(P, G, Short, M, V, R, I);
    gpu.destroy();
  });
});
