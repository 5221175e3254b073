/**
 * The decode attention kernel (one query row per sequence against its KV cache) against its float64
 * reference, on lengths that cross the 64-key tile, a length-0 sequence, GQA, and head dims 16 and
 * 128; plus the strided copy kernel the target model uses to place KV rows and aux columns.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { decodeAttentionForward, type DecodeAttentionDims } from '../../src/kernels/attention-decode.ts';
import { copyStrided } from '../../src/kernels/copy-strided.ts';
import { decodeAttentionRef } from '../../src/reference/attention-decode.ts';
import { Rng } from '../../src/util/random.ts';
import { assertDeepEqual, assertRejects, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

async function checkDecode(gpu: Gpu, dims: DecodeAttentionDims, lengths: number[], seed: number): Promise<number> {
  const rng = new Rng(seed);
  const { batch: B, heads: H, kvHeads: G, headDim: D, maxLen: T } = dims;
  const q = rng.floats(B * H * D, 2);
  const k = rng.floats(B * T * G * D, 2);
  const v = rng.floats(B * T * G * D);
  const tq = gpu.upload([B, H, D], 'f32', q, 'q');
  const tk = gpu.upload([B, T, G, D], 'f32', k, 'k');
  const tv = gpu.upload([B, T, G, D], 'f32', v, 'v');
  const tl = gpu.upload([B], 'i32', lengths, 'lengths');
  const to = gpu.tensor([B, H, D], 'f32', 'o');
  await decodeAttentionForward(gpu, { q: tq, kCache: tk, vCache: tv, lengths: tl, o: to }, dims);
  const got = await gpu.read(to);
  gpu.release(tq, tk, tv, tl, to);
  const want = decodeAttentionRef(q, k, v, lengths, dims);
  return assertRelClose(got, want, 1e-5, `decode attention ${JSON.stringify(dims)} lengths [${lengths}]`);
}

export default defineSuite('kernels/attention-decode', (t) => {
  t.test('matches the float64 reference: GQA, lengths across tiles, empty sequence, hd 16 and 128', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    let worst = 0;
    worst = Math.max(worst, await checkDecode(gpu, { batch: 3, heads: 4, kvHeads: 2, headDim: 16, maxLen: 150 }, [1, 64, 150], 1));
    worst = Math.max(worst, await checkDecode(gpu, { batch: 2, heads: 8, kvHeads: 1, headDim: 128, maxLen: 97 }, [65, 97], 2));
    worst = Math.max(worst, await checkDecode(gpu, { batch: 2, heads: 2, kvHeads: 2, headDim: 12, maxLen: 10 }, [7, 3], 3));
    // A length-0 sequence outputs zeros; its neighbour is unaffected.
    worst = Math.max(worst, await checkDecode(gpu, { batch: 2, heads: 2, kvHeads: 1, headDim: 16, maxLen: 5 }, [0, 5], 4));
    note('worst rel err', worst.toExponential(2));
    gpu.destroy();
  });

  t.test('rejects wrong shapes and dtypes, naming the tensor', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const dims = { batch: 1, heads: 2, kvHeads: 1, headDim: 8, maxLen: 4 };
    const q = gpu.tensor([1, 2, 8]);
    const k = gpu.tensor([1, 4, 1, 8]);
    const lengths = gpu.tensor([1], 'i32');
    const o = gpu.tensor([1, 2, 8]);
    await assertRejects(
      () => decodeAttentionForward(gpu, { q, kCache: gpu.tensor([1, 3, 1, 8]), vCache: k, lengths, o }, dims),
      /kCache .* layout \[B, T, nKV, hd\]/,
      'short cache',
    );
    await assertRejects(
      () => decodeAttentionForward(gpu, { q, kCache: k, vCache: k, lengths: gpu.tensor([1]), o }, dims),
      /lengths .* must be i32/,
      'f32 lengths',
    );
    await assertRejects(
      () => decodeAttentionForward(gpu, { q, kCache: k, vCache: k, lengths, o }, { ...dims, kvHeads: 3 }),
      /multiple of kvHeads/,
      'GQA',
    );
    gpu.destroy();
  });

  t.test('copyStrided places column blocks and row ranges exactly', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const src = gpu.upload(
      [3, 4],
      'f32',
      Array.from({ length: 12 }, (_, i) => i + 1),
      'src',
    );
    const dst = gpu.zeros([3, 7], 'f32', 'dst');
    // Columns 1..2 of every src row into columns 4..5 of dst.
    await copyStrided(gpu, src, dst, { rows: 3, width: 2, srcStride: 4, srcOffset: 1, dstStride: 7, dstOffset: 4 });
    assertDeepEqual([...(await gpu.read(dst))], [0, 0, 0, 0, 2, 3, 0, 0, 0, 0, 0, 6, 7, 0, 0, 0, 0, 0, 10, 11, 0], 'column block');
    await assertRejects(
      () => copyStrided(gpu, src, dst, { rows: 3, width: 2, dstStride: 7, dstOffset: 6 }),
      /dst .* needs at least 22/,
      'overflow names dst',
    );
    gpu.release(src, dst);
    gpu.destroy();
  });
});
