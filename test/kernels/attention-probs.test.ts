/**
 * The attention-probability kernel (src/kernels/attention-probs.ts) against its float64 reference at
 * every TTT step of a small GQA shape with right padding and a left-padded row (a step-0 row with no
 * visible key), for each lane split (TPR 1, 2, 4, 8); visible rows sum to 1, blocked keys are exactly
 * 0, and Σ P·V gives back the forward's own output (flash, and lanes where the device runs it), so
 * these are the probabilities it used.
 * The kernel has no backward (it is read-only), so there is no gradient test.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { ATTENTION_GEOMETRIES, flashWorkgroupBytes } from '../../src/kernels/attention-geometry.ts';
import {
  attentionDeviceFacts,
  attentionVariantUnsupported,
  chooseAttentionVariant,
  FLASH_GEOMETRY,
  LANES_GEOMETRY,
  tttAttentionForward,
  type GeometryChoice,
} from '../../src/kernels/attention.ts';
import { attentionProbs, probsLaneSplit, probsWidth } from '../../src/kernels/attention-probs.ts';
import { attentionProbsRef } from '../../src/reference/attention-probs.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertEqual, assertRejects, assertRelClose, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const DIMS = { batch: 2, seq: 13, heads: 4, kvHeads: 2, headDim: 16 };
const SLOTS = 3;

/** Σ_c P[c]·V[c] per (row, head) of one sample, from one step's [nH, S, W] probabilities: [S, nH, hd]. */
function probsTimesV(got: ArrayLike<number>, vSteps: Float32Array[], sample: number): Float64Array {
  const { seq: S, heads: H, kvHeads: G, headDim: D } = DIMS;
  const W = probsWidth(S, SLOTS);
  const pv = new Float64Array(S * H * D);
  for (let h = 0; h < H; h++) {
    const g = Math.floor(h / (H / G));
    for (let i = 0; i < S; i++) {
      for (let c = 0; c < W; c++) {
        const p = got[(h * S + i) * W + c];
        if (p === 0) continue;
        const [j, u] = c < S ? [0, c] : [c - S + 1, i];
        const vo = ((sample * S + u) * G + g) * D;
        for (let e = 0; e < D; e++) pv[(i * H + h) * D + e] += p * vSteps[j][vo + e];
      }
    }
  }
  return pv;
}

export default defineSuite('kernels/attention-probs', (t) => {
  t.test(
    'matches the float64 reference at every TTT step and lane split; rows sum to 1, blocked keys are 0, P·V = O',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D } = DIMS;
      const storage = ctx.limits.maxComputeWorkgroupStorageSize ?? 16384;
      const fits = (g: GeometryChoice) => flashWorkgroupBytes(typeof g === 'string' ? ATTENTION_GEOMETRIES[g] : g!) <= storage;
      const flashFits = fits('flash');
      const geometryName = (g: GeometryChoice) => (typeof g === 'string' ? g : 'given');
      const rng = new Rng(5);
      const slot = B * S * G * D;
      const kSteps = Array.from({ length: SLOTS }, () => rng.floats(slot, 2));
      const vSteps = Array.from({ length: SLOTS }, () => rng.floats(slot));
      const kAll = new Float32Array(SLOTS * slot);
      const vAll = new Float32Array(SLOTS * slot);
      kSteps.forEach((k, j) => kAll.set(k, j * slot));
      vSteps.forEach((v, j) => vAll.set(v, j * slot));
      // Sequence 0: right padding after 9 tokens. Sequence 1: two left-padded rows, padding at 6.
      const mask = Int32Array.from({ length: B * S }, (_, r) => {
        const [b, u] = [Math.floor(r / S), r % S];
        return b === 0 ? Number(u < 9) : Number(u >= 2 && u !== 6);
      });
      const kCache = gpu.upload([SLOTS, B, S, G, D], 'f32', kAll, 'kCache');
      const vCache = gpu.upload([SLOTS, B, S, G, D], 'f32', vAll, 'vCache');
      const tMask = gpu.upload([B, S], 'i32', mask, 'mask');
      const W = probsWidth(S, SLOTS);
      let worst = 0;
      let maxRowErr = 0;
      for (let step = 0; step < SLOTS; step++) {
        const q = rng.floats(B * S * H * D, 2);
        const tq = gpu.upload([B * S, H * D], 'f32', q, 'q');
        const o = gpu.tensor([B * S, H * D], 'f32', 'o');
        const lse = gpu.tensor([B, H, S], 'f32', 'lse');
        // The forward's own geometry: flash where the device's workgroup memory holds its tiles (WebGPU's
        // default 16 KiB does not), the one sized to the head dim otherwise, as the variant policy chooses.
        const forward: GeometryChoice = flashFits ? 'flash' : 'hd32';
        await tttAttentionForward(gpu, { q: tq, kCache, vCache, mask: tMask, o, lse }, { ...DIMS, step }, { geometry: forward });
        const out = await gpu.read(o);
        const all: [string, GeometryChoice][] = [
          ['flash (TPR 4)', 'flash'],
          ['hd32 (TPR 1)', 'hd32'],
          ['hd64 (TPR 2)', 'hd64'],
          ['TPR 8', { ...FLASH_GEOMETRY, TPR: 8 }],
        ];
        // A geometry the device cannot hold is refused by name (checked below); every other one runs.
        const lanes = all.filter(([, g]) => fits(g));
        if (step === 0) {
          const probs = gpu.tensor([SLOTS, H, S, W], 'f32', 'probs');
          for (const [name, geometry] of all.filter(([, g]) => !fits(g)))
            await assertRejects(
              () =>
                attentionProbs(gpu, { q: tq, kCache, mask: tMask, lse, probs }, { ...DIMS, step, sample: 0, slots: SLOTS }, { geometry }),
              /attention: the flash kernels \(geometry \w+\) need \d+ bytes of workgroup memory, the device allows \d+/,
              `${name}: over this device's workgroup memory, refused`,
            );
          gpu.release(probs);
        }
        for (const sample of [0, 1]) {
          const want = attentionProbsRef(q, kSteps, mask, { ...DIMS, step, sample, slots: SLOTS });
          for (const [name, geometry] of lanes) {
            // NaN-filled, so an entry the kernel failed to write shows up.
            const probs = gpu.upload([SLOTS, H, S, W], 'f32', new Float32Array(SLOTS * H * S * W).fill(NaN), 'probs');
            await attentionProbs(gpu, { q: tq, kCache, mask: tMask, lse, probs }, { ...DIMS, step, sample, slots: SLOTS }, { geometry });
            const all = (await gpu.read(probs)) as Float32Array;
            gpu.release(probs);
            const got = all.subarray(step * H * S * W, (step + 1) * H * S * W);
            worst = Math.max(worst, assertRelClose(got, want, 1e-5, `step ${step} sample ${sample} ${name}`));
            for (let h = 0; h < H; h++) {
              for (let i = 0; i < S; i++) {
                const row = got.subarray((h * S + i) * W, (h * S + i + 1) * W);
                const visible = Array.from({ length: W }, (_, c) => (c < S ? c <= i && mask[sample * S + c] === 1 : c - S + 1 <= step));
                row.forEach((p, c) =>
                  assert(visible[c] || p === 0, `step ${step} sample ${sample} head ${h} row ${i}: blocked key ${c} has P = ${p}`),
                );
                const sum = row.reduce((a, p) => a + p, 0);
                if (visible.some((v) => v)) maxRowErr = Math.max(maxRowErr, Math.abs(sum - 1));
                else assert(sum === 0, `sample ${sample} row ${i} has no visible key, its row must be 0, sums to ${sum}`);
              }
            }
            if (geometryName(geometry) !== forward) continue;
            // Σ_c P[c]·V[c] must be the forward's output row: the same probabilities the forward used.
            assertRelClose(
              probsTimesV(got, vSteps, sample),
              out.subarray(sample * S * H * D, (sample + 1) * S * H * D),
              1e-5,
              `step ${step} sample ${sample}: P·V = O`,
            );
          }
        }
        gpu.release(tq, o, lse);
      }
      assert(maxRowErr < 1e-5, `visible rows sum to 1 within 1e-5, worst |Σ − 1| = ${maxRowErr}`);
      note('worst rel err', worst.toExponential(2));
      note('worst |row sum − 1|', maxRowErr.toExponential(2));
      gpu.release(kCache, vCache, tMask);
      gpu.destroy();
    },
  );

  t.test(
    'after a lanes forward, probs with its lane split match float64 and give back its output, or lanes is refused with the reason',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D } = DIMS;
      const step = 2;
      const rng = new Rng(8);
      const slot = B * S * G * D;
      const kSteps = Array.from({ length: SLOTS }, () => rng.floats(slot, 2));
      const vSteps = Array.from({ length: SLOTS }, () => rng.floats(slot));
      const pack = (xs: Float32Array[]) => {
        const all = new Float32Array(SLOTS * slot);
        xs.forEach((x, j) => all.set(x, j * slot));
        return all;
      };
      const mask = Int32Array.from({ length: B * S }, (_, r) => Number(r % S < 11 || r < S));
      const q = rng.floats(B * S * H * D, 2);
      const T = {
        q: gpu.upload([B * S, H * D], 'f32', q, 'q'),
        kCache: gpu.upload([SLOTS, B, S, G, D], 'f32', pack(kSteps), 'kCache'),
        vCache: gpu.upload([SLOTS, B, S, G, D], 'f32', pack(vSteps), 'vCache'),
        mask: gpu.upload([B, S], 'i32', mask, 'mask'),
        o: gpu.tensor([B * S, H * D], 'f32', 'o'),
        lse: gpu.tensor([B, H, S], 'f32', 'lse'),
      };
      const why = attentionVariantUnsupported('lanes', DIMS, ctx.features, attentionDeviceFacts(ctx), ctx.limits);
      if (why) {
        await assertRejects(
          () => tttAttentionForward(gpu, T, { ...DIMS, step }, { variant: 'lanes' }),
          new RegExp(why.replace(/[()"]/g, '.')),
          'lanes refused',
        );
        note('refused', why);
      } else {
        await tttAttentionForward(gpu, T, { ...DIMS, step }, { variant: 'lanes' });
        const out = await gpu.read(T.o);
        const W = probsWidth(S, SLOTS);
        let worst = 0;
        for (const sample of [0, 1]) {
          const probs = gpu.tensor([SLOTS, H, S, W], 'f32', 'probs');
          await attentionProbs(
            gpu,
            { q: T.q, kCache: T.kCache, mask: T.mask, lse: T.lse, probs },
            { ...DIMS, step, sample, slots: SLOTS },
            { variant: 'lanes' },
          );
          const got = ((await gpu.read(probs)) as Float32Array).subarray(step * H * S * W, (step + 1) * H * S * W);
          gpu.release(probs);
          worst = Math.max(
            worst,
            assertRelClose(got, attentionProbsRef(q, kSteps, mask, { ...DIMS, step, sample, slots: SLOTS }), 1e-5, `sample ${sample}`),
          );
          assertRelClose(
            probsTimesV(got, vSteps, sample),
            out.subarray(sample * S * H * D, (sample + 1) * S * H * D),
            1e-5,
            `sample ${sample}: P·V = O`,
          );
        }
        note('worst rel err', worst.toExponential(2));
      }
      gpu.release(...Object.values(T));
      gpu.destroy();
    },
  );

  t.test('by default the scores follow the variant and lane split of the forward', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const dims = { ...DIMS, step: 1 };
    const variant = chooseAttentionVariant(dims, ctx.features, ctx.limits, attentionDeviceFacts(ctx));
    const forwardSplit = variant === 'lanes' ? LANES_GEOMETRY.TPR : FLASH_GEOMETRY.TPR;
    assertEqual(probsLaneSplit(gpu, dims), forwardSplit, `default (forward runs ${variant})`);
    const lanesWhy = attentionVariantUnsupported('lanes', dims, ctx.features, attentionDeviceFacts(ctx), ctx.limits);
    if (lanesWhy)
      assertThrows(
        () => probsLaneSplit(gpu, dims, { variant: 'lanes' }),
        new RegExp(lanesWhy.replace(/[()"]/g, '.')),
        'lanes refused where the forward refuses it',
      );
    else assertEqual(probsLaneSplit(gpu, dims, { variant: 'lanes' }), 1, 'lanes sums a row in one lane');
    assertThrows(
      () => probsLaneSplit(gpu, dims, { variant: 'lanes', geometry: 'flash' }),
      /a geometry applies to the flash variant only/,
      'a geometry with lanes',
    );
    assertEqual(probsLaneSplit(gpu, dims, { geometry: 'hd64' }), 2, 'a flash geometry gives its TPR');
    assertEqual(probsLaneSplit(gpu, dims, { variant: 'flash' }), FLASH_GEOMETRY.TPR, 'flash by name');
    gpu.destroy();
  });

  t.test('rejects a bad step, sample or probs shape, naming it', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const dims = { batch: 1, seq: 4, heads: 2, kvHeads: 1, headDim: 8, step: 0, sample: 0, slots: 2 };
    const q = gpu.tensor([4, 16]);
    const kCache = gpu.tensor([2, 1, 4, 1, 8]);
    const mask = gpu.tensor([1, 4], 'i32');
    const lse = gpu.tensor([1, 2, 4]);
    const probs = gpu.tensor([2, 2, 4, 5]);
    await assertRejects(
      () => attentionProbs(gpu, { q, kCache, mask, lse, probs }, { ...dims, step: 2 }),
      /step must be an integer in \[0, 2\)/,
      'step past the slots',
    );
    await assertRejects(
      () => attentionProbs(gpu, { q, kCache, mask, lse, probs }, { ...dims, sample: 1 }),
      /sample must be an integer in \[0, 1\)/,
      'sample past the batch',
    );
    await assertRejects(
      () => attentionProbs(gpu, { q, kCache, mask, lse, probs: gpu.tensor([2, 2, 4, 4]) }, dims),
      /probs .* needs 80/,
      'narrow probs',
    );
    await assertRejects(
      () => attentionProbs(gpu, { q, kCache, mask: gpu.tensor([1, 4]), lse, probs }, dims),
      /mask .* must be i32/,
      'f32 mask',
    );
    gpu.destroy();
  });
});
