/**
 * The target model with f16 weight storage (weightPrecision 'f16': matrices stored as f16 on the
 * GPU, f32 arithmetic) against the same checkpoint at f32 on llama-tiny and a Qwen3-style synthetic
 * model: logits and captured hidden states within F16_TOL relative error (the f16 rounding of the
 * weights, 2^-11 relative each, is the only difference), greedy tokens equal (the fixtures' top-1
 * margins are far above that error), GPU bytes at most 0.55x, the same result whether the f16 bits
 * come from the checkpoint loader or are rounded at upload, split lm_head/embedding parts, and the
 * refusals (odd row length, out-of-range value) naming the tensor.
 */
import { loadHfCheckpoint, type MatrixWeight, type TargetCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { generate } from '../../src/model/target/generate.ts';
import { TargetModel } from '../../src/model/target/model.ts';
import { assert, assertDeepEqual, assertEqual, assertRelClose, assertThrows } from '../harness/assert.ts';
import { defineSuite, type TestContext } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { copyFixtureCheckpoint, qwen3Config, writeRandomCheckpoint } from './synthetic-checkpoint.ts';

/** Relative error (‖x16 − x32‖₂ / ‖x32‖₂) allowed between the f16-weight and f32-weight model. */
const F16_TOL = 1e-2;

async function load(
  ctx: TestContext,
  fixture: string | Record<string, unknown>,
): Promise<{ f32: TargetCheckpoint; f16: TargetCheckpoint<Uint16Array>; ref?: SafetensorsFile }> {
  const tmp = tempStore(ctx.platform, 'target-f16');
  try {
    if (typeof fixture === 'string') await copyFixtureCheckpoint(ctx.fixture, fixture, tmp.files, 'm');
    else await writeRandomCheckpoint(tmp.files, 'm', fixture, 31);
    const ref = typeof fixture === 'string' ? new SafetensorsFile(await ctx.fixture(`hf/${fixture}/reference.safetensors`)) : undefined;
    return { f32: await loadHfCheckpoint(tmp.files, 'm'), f16: await loadHfCheckpoint(tmp.files, 'm', { weightPrecision: 'f16' }), ref };
  } finally {
    await tmp.cleanup();
  }
}

/** f16 vs f32 model: forward logits and hidden states, headLogits, greedy tokens through prefill + decode, bytes. */
async function compare(
  ctx: TestContext,
  f32: TargetCheckpoint,
  f16: TargetCheckpoint<MatrixWeight>,
  prompt: number[],
  newTokens: number,
): Promise<void> {
  const gpu = new Gpu(ctx.gpu);
  const m32 = TargetModel.create(gpu, f32);
  const m16 = TargetModel.create(gpu, f16);
  try {
    assertEqual(m16.weightPrecision, 'f16', 'precision inferred from the f16 bits');
    assertEqual(m16.weights.layers[0].qProj.dtype, 'f16', 'q_proj stored as f16');
    assertEqual(m16.weights.layers[0].inputNorm.dtype, 'f32', 'norms stay f32');
    const ratio = m16.weightBytes / m32.weightBytes;
    assert(ratio <= 0.55, `f16 model bytes ${m16.weightBytes} / f32 ${m32.weightBytes} = ${ratio.toFixed(3)} > 0.55`);
    ctx.note('bytesRatio', ratio.toFixed(4));
    const L = f32.config.numLayers;
    const hiddenStates = [1, Math.ceil(L / 2), L];
    const input = { inputIds: prompt, batch: 1, seqLen: prompt.length };
    const o32 = await m32.forward(input, { hiddenStates });
    const o16 = await m16.forward(input, { hiddenStates });
    const logits32 = (await gpu.read(o32.logits!)) as Float32Array;
    const logitsErr = assertRelClose(await gpu.read(o16.logits!), logits32, F16_TOL, 'forward logits f16 vs f32');
    ctx.note('logitsRelErr', logitsErr.toExponential(2));
    for (const i of hiddenStates) {
      const err = assertRelClose(
        await gpu.read(o16.hiddenStates.get(i)!),
        await gpu.read(o32.hiddenStates.get(i)!),
        F16_TOL,
        `hidden state ${i}`,
      );
      ctx.note(`hidden${i}RelErr`, err.toExponential(2));
    }
    // The head alone on the same (f32-model) final hidden state: only lm_head's rounding differs.
    const normed = o32.hiddenStates.get(L)!;
    const h32 = await m32.headLogits(normed);
    const h16 = await m16.headLogits(normed);
    assertRelClose(await gpu.read(h16), await gpu.read(h32), F16_TOL, 'headLogits f16 vs f32');
    gpu.release(...o32.hiddenStates.values(), ...o16.hiddenStates.values(), o32.logits!, o16.logits!, h32, h16);
    const g32 = await generate(m32, [prompt], { maxNewTokens: newTokens });
    const g16 = await generate(m16, [prompt], { maxNewTokens: newTokens });
    assertDeepEqual(g16, g32, 'greedy tokens (prefill + decode steps) f16 vs f32');
  } finally {
    m32.destroy();
    m16.destroy();
    gpu.destroy();
  }
}

export default defineSuite('model/target-f16', (t) => {
  t.test(
    `llama-tiny with f16 weights: logits, hidden states and head within ${F16_TOL}, same greedy tokens, <= 0.55x bytes`,
    async (ctx) => {
      const { f32, f16, ref } = await load(ctx, 'llama-tiny');
      const prompt = [...ref!.i32('gen.prompt_ids')];
      await compare(ctx, f32, f16, prompt, 6);
      // Two models, a forward each and 6 decode steps each: slow on a loaded software adapter.
    },
    { timeoutMs: 300_000 },
  );

  t.test(`Qwen3-style (q/k norms, tied embeddings) with f16 weights: within ${F16_TOL}, same greedy tokens`, async (ctx) => {
    const { f32, f16 } = await load(ctx, qwen3Config());
    await compare(ctx, f32, f16, [3, 14, 15, 9, 26, 5, 35], 5);
  });

  t.test(
    'f16 bits from the loader and f32 weights rounded at upload give the same model; split parts give the same tokens',
    async (ctx) => {
      const { f32, f16, ref } = await load(ctx, 'llama-tiny');
      const gpu = new Gpu(ctx.gpu);
      const loaded = TargetModel.create(gpu, f16);
      const rounded = TargetModel.create(gpu, f32, { weightPrecision: 'f16' });
      // A 32 KiB planning limit splits the 384 x 64 f16 embedding and lm_head (48 KiB) into two parts.
      const small = new Gpu(ctx.gpu);
      Object.defineProperty(small, 'maxBindingBytes', { value: 32 * 1024 });
      const chunked = TargetModel.create(small, f16);
      try {
        assert(chunked.weights.lmHead.isChunked && chunked.weights.embedTokens.isChunked, 'embedding and lm_head split into parts');
        const prompt = [...ref!.i32('gen.prompt_ids')];
        const input = { inputIds: prompt, batch: 1, seqLen: prompt.length };
        const a = await loaded.forward(input);
        const b = await rounded.forward(input);
        assertDeepEqual([...(await gpu.read(a.logits!))], [...(await gpu.read(b.logits!))], 'identical logits');
        gpu.release(a.logits!, b.logits!);
        const n = ref!.i32('gen.new_token_ids').length;
        assertDeepEqual(
          await generate(chunked, [prompt], { maxNewTokens: n }),
          await generate(loaded, [prompt], { maxNewTokens: n }),
          'chunked f16 tokens',
        );
        // The fixture's HF greedy tokens (computed at f32) survive the f16 rounding of the weights.
        assertDeepEqual((await generate(loaded, [prompt], { maxNewTokens: n }))[0], [...ref!.i32('gen.new_token_ids')], 'HF greedy tokens');
      } finally {
        loaded.destroy();
        rounded.destroy();
        chunked.destroy();
        gpu.destroy();
        small.destroy();
      }
    },
  );

  t.test('f16 storage refuses odd row lengths and values beyond ±65504, naming the tensor', async (ctx) => {
    const { f32: odd } = await load(ctx, qwen3Config({ intermediate_size: 47 }));
    const gpu = new Gpu(ctx.gpu);
    try {
      assertThrows(
        () => TargetModel.create(gpu, odd, { weightPrecision: 'f16' }),
        /tensor "model\.layers\.0\.mlp\.down_proj\.weight" \[32, 47\] has rows of 47 elements; f16 storage needs an even row length/,
        'odd row',
      );
      TargetModel.create(gpu, odd).destroy(); // f32 storage takes any row length
      const { f32 } = await load(ctx, qwen3Config());
      const big = Float32Array.from(f32.weights.layers[1].vProj);
      big[3] = 1e5;
      const layers = f32.weights.layers.map((l, i) => (i === 1 ? { ...l, vProj: big } : l));
      assertThrows(
        () => TargetModel.create(gpu, { config: f32.config, weights: { ...f32.weights, layers } }, { weightPrecision: 'f16' }),
        /tensor "model\.layers\.1\.self_attn\.v_proj\.weight": value 100000 at index 3 is outside the f16 range/,
        'out of range',
      );
    } finally {
      gpu.destroy();
    }
  });
});
