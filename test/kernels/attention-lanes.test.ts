/**
 * The lanes variant's attention/dq-lanes-prep (prep and dq in one dispatch) against the two
 * dispatches it replaces, attention/prep then attention/dq-lanes: the same dQ, dK and dV bits, one
 * dispatch fewer, at a step with diagonal keys, with padding and GQA, through both register sizes.
 * The default backward (the fused kernel wherever the device binds nine storage buffers) is checked
 * against float64 in test/kernels/attention.test.ts; here the two-dispatch path must give its bits.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { storageLimitUnfit } from '../../src/gpu/pipeline-cache.ts';
import {
  attentionDeviceFacts,
  attentionVariantUnsupported,
  tttAttentionBackward,
  tttAttentionForward,
  type AttentionDims,
} from '../../src/kernels/attention.ts';
import { storageBuffersOf } from '../../src/kernels/attention-geometry.ts';
import { LANES_KERNELS } from '../../src/kernels/attention-lanes.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const COMPILES = { timeoutMs: 600_000 };

/**
 * dQ, dK cache and dV cache of one backward at `step`, and the dispatches it encoded. Every output
 * starts as NaN, and the pool's free buffers are destroyed first, so the internal rowStats is a new
 * (zeroed) buffer: a run that left any of them unwritten cannot inherit the other run's results.
 */
async function backward(gpu: Gpu, d: AttentionDims, step: number, separatePrep: boolean) {
  await gpu.sync();
  gpu.trimPool();
  const rng = new Rng(900 + d.headDim);
  const slots = step + 1;
  const nq = d.batch * d.seq * d.heads * d.headDim;
  const nkv = d.batch * d.seq * d.kvHeads * d.headDim;
  const rows = [d.batch * d.seq, d.heads * d.headDim];
  const cache = [slots, d.batch, d.seq, d.kvHeads, d.headDim];
  // Row 1 ends in 4 padded positions, so some keys are masked.
  const mask = new Int32Array(d.batch * d.seq).fill(1).fill(0, 2 * d.seq - 4);
  const t = {
    q: gpu.upload(rows, 'f32', rng.floats(nq, 2), 'q'),
    kCache: gpu.upload(cache, 'f32', rng.floats(slots * nkv, 2), 'kCache'),
    vCache: gpu.upload(cache, 'f32', rng.floats(slots * nkv), 'vCache'),
    mask: gpu.upload([d.batch, d.seq], 'i32', mask, 'mask'),
    dO: gpu.upload(rows, 'f32', rng.floats(nq), 'dO'),
    o: gpu.tensor(rows, 'f32', 'o'),
    lse: gpu.tensor([d.batch, d.heads, d.seq], 'f32', 'lse'),
    dQ: gpu.upload(rows, 'f32', new Float32Array(nq).fill(Number.NaN), 'dQ'),
    dKCache: gpu.upload(cache, 'f32', new Float32Array(slots * nkv).fill(Number.NaN), 'dKCache'),
    dVCache: gpu.upload(cache, 'f32', new Float32Array(slots * nkv).fill(Number.NaN), 'dVCache'),
  };
  const dims = { ...d, step };
  try {
    await tttAttentionForward(gpu, t, dims, { variant: 'lanes' });
    const before = gpu.batcher.stats.dispatches;
    await tttAttentionBackward(gpu, t, dims, { variant: 'lanes', separatePrep });
    const dispatches = gpu.batcher.stats.dispatches - before;
    const [dQ, dK, dV] = await Promise.all([t.dQ, t.dKCache, t.dVCache].map(async (x) => Array.from(await gpu.read(x))));
    return { dQ, dK, dV, dispatches };
  } finally {
    gpu.release(...Object.values(t));
  }
}

export default defineSuite('kernels/attention-lanes', (t) => {
  t.test(
    'dq-lanes-prep gives the bits of prep then dq-lanes (dQ, dK, dV) in one dispatch fewer, at hd 5, 16 and 100',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const facts = attentionDeviceFacts(ctx);
      let ran = 0;
      for (const headDim of [5, 16, 100]) {
        const d: AttentionDims = { batch: 2, seq: 19, heads: 4, kvHeads: 2, headDim };
        const why = attentionVariantUnsupported('lanes', d, ctx.features, facts, ctx.limits);
        if (why) {
          // A device without lanes refuses the variant with the reason, whichever dQ kernel it would run.
          await assertRejects(() => backward(gpu, d, 2, false), new RegExp(why.replace(/[()"]/g, '.')), `hd ${headDim}`);
          note('refused', why);
          continue;
        }
        const fusedFits = storageLimitUnfit(LANES_KERNELS.dqPrep, ctx.limits) === undefined;
        note(`hd ${headDim}`, fusedFits ? 'dq-lanes-prep' : 'prep + dq-lanes (nine storage buffers do not bind)');
        const fused = await backward(gpu, d, 2, false);
        const separate = await backward(gpu, d, 2, true);
        assertEqual(separate.dispatches, 3, `hd ${headDim}: prep, dq and dkv`);
        assertEqual(fused.dispatches, fusedFits ? 2 : 3, `hd ${headDim}: dq-lanes-prep and dkv where it fits`);
        assertDeepEqual(fused.dQ, separate.dQ, `hd ${headDim} dQ`);
        assertDeepEqual(fused.dK, separate.dK, `hd ${headDim} dK`);
        assertDeepEqual(fused.dV, separate.dV, `hd ${headDim} dV`);
        for (const [name, values] of Object.entries({ dQ: fused.dQ, dK: fused.dK, dV: fused.dV }))
          assert(
            values.every((x) => Number.isFinite(x)),
            `hd ${headDim}: every element of ${name} was written`,
          );
        ran++;
      }
      note('headDimsCompared', ran);
      gpu.destroy();
    },
    COMPILES,
  );

  t.test('the lanes variant needs eight storage buffers; its fused dq binds nine and is optional', () => {
    assertEqual(storageBuffersOf(LANES_KERNELS), 8, 'what a device must bind for lanes');
    assertEqual(
      storageLimitUnfit(LANES_KERNELS.dqPrep, { maxStorageBuffersPerShaderStage: 8 }),
      'kernel attention/dq-lanes-prep binds 9 storage buffers, and this device allows 8 per shader stage',
      'at the default limit the backward runs prep and dq-lanes',
    );
    assertEqual(storageLimitUnfit(LANES_KERNELS.dqPrep, { maxStorageBuffersPerShaderStage: 9 }), undefined, 'nine fit');
  });
});
