/**
 * GPU attention kernels against the float64 references (src/reference/attention.ts): plain causal
 * GQA attention with key padding and the EAGLE3 TTT diagonal scheme, forward and backward, on odd
 * shapes that miss the 16-row / 8-key tiles.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import {
  attentionBackward,
  attentionForward,
  ATTENTION_GEOMETRIES,
  chooseAttentionGeometry,
  attentionDeviceFacts,
  attentionVariantUnsupported,
  ATTENTION_VARIANTS,
  chooseAttentionVariant,
  LANES_KERNELS,
  LANES_KERNELS_HD128,
  LANES_POLICY_MAX_HD,
  lanesFor,
  tttAttentionBackward,
  tttAttentionForward,
  type AttentionDims,
  type AttentionForwardOptions,
} from '../../src/kernels/attention.ts';
import { causalAttentionRef, tttAttentionBackwardRef, tttAttentionRef } from '../../src/reference/attention.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertRelClose, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const TOL = 1e-5;

/**
 * Tests that compile a head size's pipelines first. llvmpipe JIT-compiles each pipeline on first
 * use (~20 s CPU for the four kernels at hd 16, minutes at hd 128, which is why no test uses it);
 * Mesa's shader cache makes later runs fast, but a cold run on a loaded 2-core machine needs room.
 */
const COMPILES = { timeoutMs: 600_000 };

/** The brief's shape: B 2, S 37, nH 4, nKV 2, hd 16, 7 padded positions at the end of row 1. */
const MAIN: AttentionDims = { batch: 2, seq: 37, heads: 4, kvHeads: 2, headDim: 16 };

function rightPadded(d: AttentionDims, padded: number[]): Int32Array {
  const mask = new Int32Array(d.batch * d.seq).fill(1);
  padded.forEach((n, b) => mask.fill(0, b * d.seq + d.seq - n, (b + 1) * d.seq));
  return mask;
}

interface Problem {
  q: Float32Array;
  /** K_j / V_j per step j, each [B, S, nKV, hd]. */
  ks: Float32Array[];
  vs: Float32Array[];
  dO: Float32Array;
}

function randomProblem(seed: number, d: AttentionDims, steps: number): Problem {
  const rng = new Rng(seed);
  const nq = d.batch * d.seq * d.heads * d.headDim;
  const nkv = d.batch * d.seq * d.kvHeads * d.headDim;
  // Scale 2 gives peaked softmaxes (scores up to ~±8 at hd 16), not just near-uniform ones.
  const q = rng.floats(nq, 2);
  const ks = Array.from({ length: steps }, () => rng.floats(nkv, 2));
  const vs = Array.from({ length: steps }, () => rng.floats(nkv));
  return { q, ks, vs, dO: rng.floats(nq) };
}

/** Pack per-step arrays into one [J, B, S, nKV, hd] cache; slots past the data hold `fill`. */
function packCache(steps: Float32Array[], slots: number, fill: number): Float32Array {
  const n = steps[0].length;
  const out = new Float32Array(slots * n).fill(fill);
  steps.forEach((s, j) => out.set(s, j * n));
  return out;
}

function slot(cache: ArrayLike<number>, j: number, n: number): Float32Array {
  return Float32Array.from(Array.prototype.slice.call(cache, j * n, (j + 1) * n) as number[]);
}

function allFinite(a: ArrayLike<number>, what: string): void {
  for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i])) throw new Error(`${what}: non-finite value ${a[i]} at ${i}`);
}

/**
 * Run the TTT forward and backward at `step` with a cache of `slots` slots (unused slots hold NaN,
 * so reading them would show) and compare everything with the literal docs/eagle3.md §4 reference.
 */
async function checkTtt(
  gpu: Gpu,
  d: AttentionDims,
  mask: Int32Array,
  step: number,
  slots: number,
  seed: number,
  options: AttentionForwardOptions = {},
): Promise<number> {
  const pr = randomProblem(seed, d, step + 1);
  const dims = { ...d, step };
  const nq = pr.q.length;
  const nkv = pr.ks[0].length;
  const T: Tensor[] = [];
  const up = (shape: number[], dtype: 'f32' | 'i32', data: ArrayLike<number>, label: string) => {
    const t = gpu.upload(shape, dtype, data, label);
    T.push(t);
    return t;
  };
  const q = up([d.batch * d.seq, d.heads * d.headDim], 'f32', pr.q, 'q');
  const kCache = up([slots, d.batch, d.seq, d.kvHeads, d.headDim], 'f32', packCache(pr.ks, slots, Number.NaN), 'kCache');
  const vCache = up([slots, d.batch, d.seq, d.kvHeads, d.headDim], 'f32', packCache(pr.vs, slots, Number.NaN), 'vCache');
  const m = up([d.batch, d.seq], 'i32', mask, 'mask');
  const dO = up([d.batch * d.seq, d.heads * d.headDim], 'f32', pr.dO, 'dO');
  // Gradient caches start with a sentinel so that "slots past step are untouched" can be checked.
  const dKCache = up([slots, d.batch, d.seq, d.kvHeads, d.headDim], 'f32', new Float32Array(slots * nkv).fill(7), 'dKCache');
  const dVCache = up([slots, d.batch, d.seq, d.kvHeads, d.headDim], 'f32', new Float32Array(slots * nkv).fill(7), 'dVCache');
  const o = gpu.tensor([d.batch * d.seq, d.heads * d.headDim], 'f32', 'o');
  const lse = gpu.tensor([d.batch, d.heads, d.seq], 'f32', 'lse');
  const dQ = gpu.tensor([d.batch * d.seq, d.heads * d.headDim], 'f32', 'dQ');
  T.push(o, lse, dQ);

  await tttAttentionForward(gpu, { q, kCache, vCache, mask: m, o, lse }, dims, options);
  await tttAttentionBackward(gpu, { q, kCache, vCache, mask: m, o, lse, dO, dQ, dKCache, dVCache }, dims, options);
  const [gotO, gotL, gotDQ, gotDK, gotDV] = await Promise.all([o, lse, dQ, dKCache, dVCache].map((t) => gpu.read(t)));

  const ref = tttAttentionRef(pr.q, pr.ks, pr.vs, mask, dims);
  const grads = tttAttentionBackwardRef(pr.q, pr.ks, pr.vs, mask, pr.dO, dims);
  const tag = `step ${step}`;
  let worst = assertRelClose(gotO, ref.o, TOL, `${tag} o`);
  worst = Math.max(worst, assertRelClose(gotL, ref.lse, TOL, `${tag} lse`));
  worst = Math.max(worst, assertRelClose(gotDQ, grads.dq, TOL, `${tag} dQ`));
  for (let j = 0; j <= step; j++) {
    worst = Math.max(worst, assertRelClose(slot(gotDK, j, nkv), grads.dk[j], TOL, `${tag} dK_${j}`));
    worst = Math.max(worst, assertRelClose(slot(gotDV, j, nkv), grads.dv[j], TOL, `${tag} dV_${j}`));
  }
  for (let j = step + 1; j < slots; j++) {
    assert(
      slot(gotDK, j, nkv).every((x) => x === 7) && slot(gotDV, j, nkv).every((x) => x === 7),
      `${tag}: gradient slot ${j} was written`,
    );
  }
  assertEqual(gotO.length, nq, 'o length');
  gpu.release(...T);
  return worst;
}

export default defineSuite('kernels/attention', (t) => {
  t.test(
    'causal GQA forward and backward vs float64 (B2 S37 nH4 nKV2 hd16, 7 padded)',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const d = MAIN;
      const mask = rightPadded(d, [0, 7]);
      const pr = randomProblem(11, d, 1);
      const q = gpu.upload([d.batch * d.seq, d.heads * d.headDim], 'f32', pr.q, 'q');
      const k = gpu.upload([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', pr.ks[0], 'k');
      const v = gpu.upload([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', pr.vs[0], 'v');
      const m = gpu.upload([d.batch, d.seq], 'i32', mask, 'mask');
      const dO = gpu.upload([d.batch * d.seq, d.heads * d.headDim], 'f32', pr.dO, 'dO');
      // Output buffers start as NaN: every element must be written.
      const nan = (n: number) => new Float32Array(n).fill(Number.NaN);
      const o = gpu.upload([d.batch * d.seq, d.heads * d.headDim], 'f32', nan(pr.q.length), 'o');
      const lse = gpu.upload([d.batch, d.heads, d.seq], 'f32', nan(d.batch * d.heads * d.seq), 'lse');
      const dQ = gpu.upload([d.batch * d.seq, d.heads * d.headDim], 'f32', nan(pr.q.length), 'dQ');
      const dK = gpu.upload([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', nan(pr.ks[0].length), 'dK');
      const dV = gpu.upload([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', nan(pr.ks[0].length), 'dV');
      await attentionForward(gpu, { q, k, v, mask: m, o, lse }, d);
      await attentionBackward(gpu, { q, k, v, mask: m, o, lse, dO, dQ, dK, dV }, d);
      const [gotO, gotL, gotDQ, gotDK, gotDV] = await Promise.all([o, lse, dQ, dK, dV].map((x) => gpu.read(x)));
      const ref = causalAttentionRef(pr.q, pr.ks[0], pr.vs[0], mask, d);
      const grads = tttAttentionBackwardRef(pr.q, pr.ks, pr.vs, mask, pr.dO, { ...d, step: 0 });
      const errs = [
        assertRelClose(gotO, ref.o, TOL, 'o'),
        assertRelClose(gotL, ref.lse, TOL, 'lse'),
        assertRelClose(gotDQ, grads.dq, TOL, 'dQ'),
        assertRelClose(gotDK, grads.dk[0], TOL, 'dK'),
        assertRelClose(gotDV, grads.dv[0], TOL, 'dV'),
      ];
      // Padded keys (last 7 of row 1) get exactly zero gradient.
      for (let u = d.seq - 7; u < d.seq; u++) {
        for (let i = 0; i < d.kvHeads * d.headDim; i++) {
          const at = (d.seq + u) * d.kvHeads * d.headDim + i;
          assert(gotDK[at] === 0 && gotDV[at] === 0, `padded key ${u} of row 1 has gradient`);
        }
      }
      note('worstRelErr', Math.max(...errs));
      gpu.release(q, k, v, m, dO, o, lse, dQ, dK, dV);
      gpu.destroy();
    },
    COMPILES,
  );

  t.test(
    'causal over more head shapes: MHA hd 16, MQA hd 5, S 1',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      let worst = 0;
      const cases: [AttentionDims, number[]][] = [
        [{ batch: 1, seq: 21, heads: 2, kvHeads: 2, headDim: 16 }, [3]],
        [{ batch: 3, seq: 17, heads: 3, kvHeads: 1, headDim: 5 }, [0, 16, 2]],
        [{ batch: 2, seq: 1, heads: 2, kvHeads: 1, headDim: 5 }, [0, 0]],
      ];
      for (const [d, pads] of cases) worst = Math.max(worst, await checkTtt(gpu, d, rightPadded(d, pads), 0, 1, 21 + d.headDim));
      note('worstRelErr', worst);
      gpu.destroy();
    },
    COMPILES,
  );

  for (const step of [0, 1, 3]) {
    t.test(
      `TTT step ${step} forward and backward vs literal docs/eagle3.md §4 reference (padding in row 1)`,
      async ({ gpu: ctx, note }) => {
        const gpu = new Gpu(ctx);
        // A 5-slot cache, as allocated for a TTT length of 5; slots past `step` hold NaN.
        const worst = await checkTtt(gpu, MAIN, rightPadded(MAIN, [0, 7]), step, 5, 300 + step);
        note('worstRelErr', worst);
        gpu.destroy();
      },
    );
  }

  // Each flash geometry, forward and backward at a TTT step, with padding and a row block the tiles
  // miss. The sized ones run at head dims that keep each lane's registers at most 8 values wide
  // (head_dim / TPR), as flash's are at 32: wider ones compile for minutes on a cold software
  // adapter (chooseAttentionGeometry). hd128 has flash's fields, so flash covers it.
  const GEOMETRY_CASES: [AttentionForwardOptions['geometry'], number][] = [
    ['hd32', 8],
    ['hd64', 16],
    [undefined, 32],
    ['flash', 16],
  ];
  for (const [geometry, headDim] of GEOMETRY_CASES) {
    const d: AttentionDims = { batch: 2, seq: 19, heads: 2, kvHeads: 1, headDim };
    const name = geometry ?? chooseAttentionGeometry(d, {});
    t.test(
      `flash geometry ${name}${geometry ? '' : ' (geometry policy)'} at hd ${headDim}: TTT step 2 forward and backward vs float64`,
      async ({ gpu: ctx, note }) => {
        const gpu = new Gpu(ctx);
        note('worstRelErr', await checkTtt(gpu, d, rightPadded(d, [0, 4]), 2, 3, 500 + headDim, { variant: 'flash', geometry }));
        gpu.destroy();
      },
      COMPILES,
    );
  }

  // Each variant by name, with padding, row blocks the sequence misses (S 19) and GQA. lanes at head
  // dims that are and are not a multiple of its 8-lane split (36: a part-filled fifth slot), up to
  // the largest of its 64-slot kernels, and through its 128-slot ones (65, 100, 128); flash at the odd
  // and the fixture's head dim (its geometries are covered above; wider flash heads compile slowly
  // cold). A device that cannot run a variant must refuse it with the reason, never run another.
  const VARIANT_HEAD_DIMS: Record<(typeof ATTENTION_VARIANTS)[number], number[]> = { flash: [5, 16], lanes: [5, 16, 36, 64, 65, 100, 128] };
  for (const variant of ATTENTION_VARIANTS) {
    const dims = VARIANT_HEAD_DIMS[variant];
    t.test(
      `variant ${variant} at hd ${dims.join(', ')}: TTT step 2 forward and backward vs float64, or refused with the reason`,
      async ({ gpu: ctx, note }) => {
        const gpu = new Gpu(ctx);
        const facts = attentionDeviceFacts(ctx);
        // A CPU adapter with subgroups must say how wide they are; otherwise lanes would be refused
        // for a missing fact and every default-policy test here would quietly run flash instead.
        assert(
          !(facts.fallbackAdapter && ctx.features.has('subgroups') && facts.subgroupMinSize === undefined),
          'a fallback adapter with subgroups reports no subgroupMinSize',
        );
        let worst = 0;
        let ran = 0;
        for (const headDim of dims) {
          const d: AttentionDims = { batch: 2, seq: 19, heads: 4, kvHeads: 2, headDim };
          const why = attentionVariantUnsupported(variant, d, ctx.features, facts, ctx.limits);
          if (why) {
            await assertRejects(
              () => checkTtt(gpu, d, rightPadded(d, [0, 4]), 2, 3, 600 + headDim, { variant }),
              new RegExp(why.replace(/[()"]/g, '.')),
              `${variant} hd ${headDim}`,
            );
            note('refused', why);
            continue;
          }
          worst = Math.max(worst, await checkTtt(gpu, d, rightPadded(d, [0, 4]), 2, 3, 600 + headDim, { variant }));
          ran++;
        }
        if (ran > 0) note('worstRelErr', worst);
        gpu.destroy();
      },
      COMPILES,
    );
  }

  t.test('TTT step 0 equals plain causal attention exactly', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const d = MAIN;
    const pr = randomProblem(5, d, 2);
    const mask = gpu.upload([d.batch, d.seq], 'i32', rightPadded(d, [2, 7]), 'mask');
    const q = gpu.upload([d.batch * d.seq, d.heads * d.headDim], 'f32', pr.q, 'q');
    const k = gpu.upload([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', pr.ks[0], 'k');
    const v = gpu.upload([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', pr.vs[0], 'v');
    const kCache = gpu.upload([2, d.batch, d.seq, d.kvHeads, d.headDim], 'f32', packCache(pr.ks, 2, 0), 'kCache');
    const vCache = gpu.upload([2, d.batch, d.seq, d.kvHeads, d.headDim], 'f32', packCache(pr.vs, 2, 0), 'vCache');
    const o1 = gpu.tensor([d.batch * d.seq, d.heads * d.headDim], 'f32', 'o1');
    const o2 = gpu.tensor([d.batch * d.seq, d.heads * d.headDim], 'f32', 'o2');
    const l1 = gpu.tensor([d.batch, d.heads, d.seq], 'f32', 'l1');
    const l2 = gpu.tensor([d.batch, d.heads, d.seq], 'f32', 'l2');
    await attentionForward(gpu, { q, k, v, mask, o: o1, lse: l1 }, d);
    await tttAttentionForward(gpu, { q, kCache, vCache, mask, o: o2, lse: l2 }, { ...d, step: 0 });
    assertDeepEqual(Array.from(await gpu.read(o2)), Array.from(await gpu.read(o1)), 'o');
    assertDeepEqual(Array.from(await gpu.read(l2)), Array.from(await gpu.read(l1)), 'lse');
    gpu.release(mask, q, k, v, kCache, vCache, o1, o2, l1, l2);
    gpu.destroy();
  });

  t.test('rows with no visible key (left padding) give zeros and zero gradients, never NaN', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const d: AttentionDims = { batch: 2, seq: 19, heads: 4, kvHeads: 2, headDim: 16 };
    // Row 1: first 5 positions padded (left padding), so its query rows 0..4 see no key at step 0;
    // row 0 is entirely padding.
    const mask = new Int32Array(d.batch * d.seq);
    mask.fill(1, d.seq + 5, 2 * d.seq);
    let worst = await checkTtt(gpu, d, mask, 0, 2, 77);
    // At step 2 the same rows see their diagonal keys, so they are ordinary rows again.
    worst = Math.max(worst, await checkTtt(gpu, d, mask, 2, 3, 78));

    // Direct look at the step-0 outputs: zeros for the empty rows, finite everywhere.
    const pr = randomProblem(79, d, 1);
    const q = gpu.upload([d.batch * d.seq, d.heads * d.headDim], 'f32', pr.q, 'q');
    const k = gpu.upload([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', pr.ks[0], 'k');
    const v = gpu.upload([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', pr.vs[0], 'v');
    const m = gpu.upload([d.batch, d.seq], 'i32', mask, 'mask');
    const dO = gpu.upload([d.batch * d.seq, d.heads * d.headDim], 'f32', pr.dO, 'dO');
    const o = gpu.tensor([d.batch * d.seq, d.heads * d.headDim], 'f32', 'o');
    const lse = gpu.tensor([d.batch, d.heads, d.seq], 'f32', 'lse');
    const dQ = gpu.tensor([d.batch * d.seq, d.heads * d.headDim], 'f32', 'dQ');
    const dK = gpu.tensor([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', 'dK');
    const dV = gpu.tensor([d.batch, d.seq, d.kvHeads, d.headDim], 'f32', 'dV');
    await attentionForward(gpu, { q, k, v, mask: m, o, lse }, d);
    await attentionBackward(gpu, { q, k, v, mask: m, o, lse, dO, dQ, dK, dV }, d);
    const [gotO, gotL, gotDQ, gotDK, gotDV] = await Promise.all([o, lse, dQ, dK, dV].map((x) => gpu.read(x)));
    for (const [a, name] of [
      [gotO, 'o'],
      [gotL, 'lse'],
      [gotDQ, 'dQ'],
      [gotDK, 'dK'],
      [gotDV, 'dV'],
    ] as const)
      allFinite(a, name);
    const rowWidth = d.heads * d.headDim;
    const emptyRows = [...Array.from({ length: d.seq }, (_, i) => i), ...[0, 1, 2, 3, 4].map((i) => d.seq + i)];
    for (const row of emptyRows) {
      for (let i = 0; i < rowWidth; i++) {
        assert(gotO[row * rowWidth + i] === 0 && gotDQ[row * rowWidth + i] === 0, `empty query row ${row}: o and dQ must be 0`);
      }
    }
    assert(
      gotDK.slice(0, d.seq * d.kvHeads * d.headDim).every((x) => x === 0),
      'dK of the all-padding batch row is 0',
    );
    note('worstRelErr', worst);
    gpu.release(q, k, v, m, dO, o, lse, dQ, dK, dV);
    gpu.destroy();
  });

  t.test('accumulate adds into the gradient caches; repeated backward is bitwise deterministic', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const d: AttentionDims = { batch: 1, seq: 23, heads: 6, kvHeads: 2, headDim: 16 };
    const dims = { ...d, step: 2 };
    const pr = randomProblem(9, d, 3);
    const nkv = pr.ks[0].length;
    const mask = gpu.upload([d.batch, d.seq], 'i32', rightPadded(d, [4]), 'mask');
    const q = gpu.upload([d.seq, d.heads * d.headDim], 'f32', pr.q, 'q');
    const kCache = gpu.upload([3, 1, d.seq, d.kvHeads, d.headDim], 'f32', packCache(pr.ks, 3, 0), 'kCache');
    const vCache = gpu.upload([3, 1, d.seq, d.kvHeads, d.headDim], 'f32', packCache(pr.vs, 3, 0), 'vCache');
    const dO = gpu.upload([d.seq, d.heads * d.headDim], 'f32', pr.dO, 'dO');
    const o = gpu.tensor([d.seq, d.heads * d.headDim], 'f32', 'o');
    const lse = gpu.tensor([1, d.heads, d.seq], 'f32', 'lse');
    const dQ = gpu.tensor([d.seq, d.heads * d.headDim], 'f32', 'dQ');
    const base = new Rng(10).floats(3 * nkv);
    const dKCache = gpu.upload([3 * nkv], 'f32', base, 'dKCache');
    const dVCache = gpu.upload([3 * nkv], 'f32', base, 'dVCache');
    const dKFresh = gpu.tensor([3 * nkv], 'f32', 'dKFresh');
    const dVFresh = gpu.tensor([3 * nkv], 'f32', 'dVFresh');
    const fwd = { q, kCache, vCache, mask, o, lse };
    await tttAttentionForward(gpu, fwd, dims);
    await tttAttentionBackward(gpu, { ...fwd, dO, dQ, dKCache, dVCache }, dims, { accumulate: true });
    await tttAttentionBackward(gpu, { ...fwd, dO, dQ, dKCache: dKFresh, dVCache: dVFresh }, dims);
    const first = await gpu.read(dKFresh);
    await tttAttentionBackward(gpu, { ...fwd, dO, dQ, dKCache: dKFresh, dVCache: dVFresh }, dims);
    assertDeepEqual(Array.from(await gpu.read(dKFresh)), Array.from(first), 'second backward equals the first bit for bit');
    const grads = tttAttentionBackwardRef(pr.q, pr.ks, pr.vs, rightPadded(d, [4]), pr.dO, dims);
    const wantK = Float64Array.from(base, (x, i) => x + grads.dk[Math.floor(i / nkv)][i % nkv]);
    const wantV = Float64Array.from(base, (x, i) => x + grads.dv[Math.floor(i / nkv)][i % nkv]);
    const e1 = assertRelClose(await gpu.read(dKCache), wantK, TOL, 'accumulated dK');
    const e2 = assertRelClose(await gpu.read(dVCache), wantV, TOL, 'accumulated dV');
    note('worstRelErr', Math.max(e1, e2));
    gpu.release(mask, q, kCache, vCache, dO, o, lse, dQ, dKCache, dVCache, dKFresh, dVFresh);
    gpu.destroy();
  });

  t.test('bad inputs are rejected with errors naming the tensor', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const d: AttentionDims = { batch: 1, seq: 4, heads: 2, kvHeads: 1, headDim: 8 };
    const q = gpu.zeros([4, 16], 'f32', 'q');
    const k = gpu.zeros([4, 8], 'f32', 'k');
    const mask = gpu.zeros([1, 4], 'i32', 'mask');
    const maskF = gpu.zeros([1, 4], 'f32', 'maskF');
    const o = gpu.zeros([4, 16], 'f32', 'o');
    const lse = gpu.zeros([1, 2, 4], 'f32', 'lse');
    const shortO = gpu.zeros([3, 16], 'f32', 'shortO');
    await assertRejects(() => attentionForward(gpu, { q, k, v: k, mask: maskF, o, lse }, d), /mask \(maskF\) must be i32/, 'mask dtype');
    await assertRejects(
      () => attentionForward(gpu, { q, k, v: k, mask, o: shortO, lse }, d),
      /o \(shortO \[3, 16\]\) has 48 elements/,
      'o size',
    );
    await assertRejects(
      () => attentionForward(gpu, { q, k, v: k, mask, o, lse }, { ...d, kvHeads: 3 }),
      /multiple of kvHeads 3/,
      'GQA ratio',
    );
    await assertRejects(
      () => tttAttentionForward(gpu, { q, kCache: k, vCache: k, mask, o, lse }, { ...d, step: 1 }),
      /k \/ kCache \(k \[4, 8\]\).*step 1 needs \[J ≥ 2/,
      'cache too small for the step',
    );
    await assertRejects(
      () => attentionForward(gpu, { q, k, v: k, mask, o, lse }, { ...d, seq: 0 }),
      /seq must be a positive integer/,
      'zero seq',
    );
    gpu.release(q, k, mask, maskF, o, lse, shortO);
    gpu.destroy();
  });

  t.test('variant policy is a pure function of shape, features, limits and device facts', () => {
    const d: AttentionDims = { batch: 4, seq: 2048, heads: 32, kvHeads: 8, headDim: 128 };
    const none = new Set<string>();
    const sg = new Set(['shader-f16', 'subgroups']);
    const cpu8 = { fallbackAdapter: true, subgroupMinSize: 8 };
    const cpu4 = { fallbackAdapter: true, subgroupMinSize: 4 };
    const gpu32 = { fallbackAdapter: false, subgroupMinSize: 32 };
    assertEqual(chooseAttentionVariant(d, none, {}, {}), 'flash', 'Llama-3 8B draft shape, default limits');
    assertEqual(chooseAttentionVariant(d, sg, {}, gpu32), 'flash', 'a GPU with subgroups keeps flash');
    assertEqual(chooseAttentionVariant(d, sg, {}, cpu8), 'lanes', `CPU adapter, head dim 128 (lanes up to ${LANES_POLICY_MAX_HD})`);
    assertEqual(lanesFor(64).kernels, LANES_KERNELS, 'head dims up to 64 take the 64-slot lanes kernels');
    assertEqual(lanesFor(65).kernels, LANES_KERNELS_HD128, 'head dims 65 to 128 take the 128-slot ones');
    assertEqual(lanesFor(128).geometry.MAX_HD, 128, 'the 128-slot geometry');
    const lab: AttentionDims = { batch: 4, seq: 56, heads: 4, kvHeads: 2, headDim: 32 };
    assertEqual(chooseAttentionVariant(lab, sg, {}, cpu8), 'lanes', 'CPU adapter with 8-lane subgroups, lab draft');
    assertEqual(chooseAttentionVariant({ ...lab, headDim: 5 }, sg, {}, cpu8), 'lanes', 'CPU adapter, odd head dim');
    assertEqual(chooseAttentionVariant(lab, none, {}, cpu8), 'flash', 'CPU adapter without the subgroups feature');
    assertEqual(chooseAttentionVariant(lab, sg, {}, cpu4), 'flash', 'CPU adapter with 4-lane subgroups');
    assertEqual(chooseAttentionVariant(lab, sg, {}, gpu32), 'flash', 'GPU, lab draft');
    assertEqual(
      chooseAttentionVariant(lab, sg, { maxComputeWorkgroupStorageSize: 1024 }, cpu8),
      'lanes',
      'lanes needs no workgroup memory',
    );
    assertEqual(chooseAttentionVariant({ ...d, headDim: 7, seq: 1 }, none, {}, {}), 'flash', 'tiny odd shape');
    assertThrows(() => chooseAttentionVariant({ ...d, headDim: 256 }, none, {}, {}), /head dim 256 exceeds 128/, 'head dim too large');
    assertThrows(
      () => chooseAttentionVariant(d, none, { maxComputeWorkgroupStorageSize: 8192 }, {}),
      /workgroup memory/,
      'small workgroup memory',
    );
    assertThrows(
      () => chooseAttentionVariant(d, none, { maxStorageBuffersPerShaderStage: 4 }, {}),
      /storage buffers/,
      'few storage buffers',
    );
    assertThrows(() => chooseAttentionVariant({ ...d, seq: 16 * 70000 }, none, {}, {}), /exceeds the device's 65535/, 'grid too large');
    assertEqual(
      attentionVariantUnsupported('lanes', lab, none, cpu8, {}),
      'attention variant lanes needs the WebGPU feature "subgroups"',
      'lanes names the missing feature',
    );
    assertEqual(
      attentionVariantUnsupported('lanes', { ...lab, headDim: 129 }, sg, cpu8, {}),
      'attention variant lanes serves head dims up to 128, got 129',
      'lanes names its largest head dim',
    );
    assertEqual(attentionVariantUnsupported('flash', lab, none, {}, {}), undefined, 'flash needs nothing');
    assertThrows(
      () => chooseAttentionVariant(lab, sg, { maxStorageBuffersPerShaderStage: 4 }, cpu8),
      /flash kernels bind 8 storage buffers/,
      'lanes is not picked where its 8 storage buffers do not fit (nor flash)',
    );
    assertEqual(
      attentionVariantUnsupported('lanes', lab, sg, cpu8, { maxStorageBuffersPerShaderStage: 4 }),
      'attention variant lanes binds 8 storage buffers, the device allows 4',
      'lanes names the storage-buffer limit',
    );
    assertEqual(
      attentionVariantUnsupported('lanes', { ...lab, seq: 8 * 70000 }, sg, cpu8, {}),
      "attention variant lanes: a grid dimension of 70000 workgroups (seq 560000, heads 4, batch 4) exceeds the device's 65535",
      'lanes names the grid',
    );
  });

  t.test('a geometry with the lanes variant, or an unknown variant, is refused', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const d: AttentionDims = { batch: 1, seq: 8, heads: 2, kvHeads: 1, headDim: 16 };
    await assertRejects(
      () => checkTtt(gpu, d, rightPadded(d, [0]), 0, 1, 9, { variant: 'lanes', geometry: 'flash' }),
      /a geometry applies to the flash variant only/,
      'geometry with lanes',
    );
    await assertRejects(
      () => checkTtt(gpu, d, rightPadded(d, [0]), 0, 1, 9, { variant: 'tiles' as never }),
      /unknown variant "tiles" \(known: flash, lanes\)/,
      'unknown variant',
    );
    gpu.destroy();
  });

  t.test('geometry policy sizes the tiles to the head dim; bad geometries are refused', async ({ gpu: ctx }) => {
    const d: AttentionDims = { batch: 4, seq: 56, heads: 4, kvHeads: 2, headDim: 32 };
    assertDeepEqual(
      [5, 16, 32, 33, 64, 65, 128].map((headDim) => chooseAttentionGeometry({ ...d, headDim }, {})),
      ['flash', 'flash', 'flash', 'flash', 'flash', 'flash', 'flash'],
      'flash wherever it fits',
    );
    // flash needs 12,352 bytes of workgroup memory, hd32 6,272 (hd64 12,416: never smaller than flash).
    assertDeepEqual(
      [5, 32].map((headDim) => chooseAttentionGeometry({ ...d, headDim }, { maxComputeWorkgroupStorageSize: 12288 })),
      ['hd32', 'hd32'],
      'sized to the head dim where flash does not fit',
    );
    assertEqual(chooseAttentionGeometry({ ...d, seq: 4096, batch: 1 }, {}), 'flash', 'sequence length within the grid limit');
    for (const [name, g] of Object.entries(ATTENTION_GEOMETRIES)) {
      assert(g.MAX_HD % g.TPR === 0 && g.BR * g.TPR >= g.BC && g.BK * g.TPR >= g.BQ, `${name}: the shaders' const_asserts hold`);
    }
    // hd32 fits 8 KiB of workgroup memory; the 128-wide tiles do not.
    assertEqual(chooseAttentionGeometry(d, { maxComputeWorkgroupStorageSize: 8192 }), 'hd32', 'small workgroup memory, small head');
    assertThrows(
      () => chooseAttentionGeometry({ ...d, headDim: 128 }, { maxComputeWorkgroupStorageSize: 8192 }),
      /geometry hd128\) need 12352 bytes/,
      'small memory, big head',
    );
    const gpu = new Gpu(ctx);
    const q = gpu.zeros([4, 64], 'f32', 'q');
    const k = gpu.zeros([4, 32], 'f32', 'k');
    const mask = gpu.zeros([1, 4], 'i32', 'mask');
    const lse = gpu.zeros([1, 2, 4], 'f32', 'lse');
    const t4 = { q, k, v: k, mask, o: q, lse };
    const small: AttentionDims = { batch: 1, seq: 4, heads: 2, kvHeads: 1, headDim: 32 };
    await assertRejects(
      () => attentionForward(gpu, t4, { ...small, headDim: 32 }, { geometry: 'hd16' as never }),
      /unknown geometry "hd16"/,
      'unknown name',
    );
    await assertRejects(
      () => attentionForward(gpu, t4, small, { geometry: { ...ATTENTION_GEOMETRIES.hd32, TPR: 3 } }),
      /geometry field TPR must be 1, 2, 4 or 8, got 3/,
      'TPR 3',
    );
    await assertRejects(
      () => attentionForward(gpu, t4, small, { geometry: { ...ATTENTION_GEOMETRIES.hd32, BC: 0 } }),
      /geometry field BC must be a positive integer/,
      'BC 0',
    );
    const q2 = gpu.zeros([4, 128], 'f32', 'q2');
    const k2 = gpu.zeros([4, 64], 'f32', 'k2');
    await assertRejects(
      () => attentionForward(gpu, { ...t4, q: q2, k: k2, v: k2, o: q2 }, { ...small, headDim: 64 }, { geometry: 'hd32' }),
      /head dim 64 exceeds 32, the largest geometry hd32 serves/,
      'head too wide',
    );
    gpu.release(q, k, mask, lse, q2, k2);
    gpu.destroy();
  });
});
