/**
 * Float64 reference forward vs HF transformers (fixtures hf/llama-tiny, hf/qwen2-tiny): every
 * hidden state and the logits within 1e-4 relative over unpadded positions, and greedy generation
 * token for token. Plus a random Qwen3-style checkpoint written here and loaded through the loader.
 */
import { defineSuite, type TestContext } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRelClose, relativeError } from '../harness/assert.ts';
import { loadHfCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { forwardReference, greedyGenerateReference } from '../../src/reference/llama.ts';
import { tempStore } from '../data/temp-store.ts';
import { copyFixtureCheckpoint, qwen3Config, writeRandomCheckpoint } from '../model/synthetic-checkpoint.ts';

/** Rows of [batch, seqLen, width] whose attention_mask is 1, concatenated. */
function unpadded(x: ArrayLike<number>, mask: ArrayLike<number>, width: number): Float64Array {
  const out: number[] = [];
  for (let r = 0; r < mask.length; r++) if (mask[r]) for (let j = 0; j < width; j++) out.push(x[r * width + j]);
  return Float64Array.from(out);
}

async function parity(name: string, { platform, fixture, note }: TestContext): Promise<void> {
  const tmp = tempStore(platform, `ref-${name}`);
  try {
    await copyFixtureCheckpoint(fixture, name, tmp.files, 'm');
    const model = await loadHfCheckpoint(tmp.files, 'm');
    const ref = new SafetensorsFile(await fixture(`hf/${name}/reference.safetensors`), `${name}/reference.safetensors`);
    const [batch, seqLen] = ref.shape('input_ids');
    const mask = ref.i32('attention_mask');
    assert(mask.includes(0), 'fixture has padding to exercise the mask');
    const out = forwardReference(model, { inputIds: ref.i32('input_ids'), batch, seqLen, attentionMask: mask });
    const H = model.config.hiddenSize;
    let worst = 0;
    for (let i = 0; i <= model.config.numLayers; i++) {
      const err = assertRelClose(
        unpadded(out.hiddenStates[i], mask, H),
        unpadded(ref.f32(`hidden_states.${i}`), mask, H),
        1e-4,
        `hidden_states.${i}`,
      );
      worst = Math.max(worst, err);
    }
    worst = Math.max(
      worst,
      assertRelClose(
        unpadded(out.lastLayerPrenorm, mask, H),
        unpadded(ref.f32('last_layer_output_prenorm'), mask, H),
        1e-4,
        'last_layer_output_prenorm',
      ),
    );
    const logitsErr = assertRelClose(
      unpadded(out.logits, mask, model.config.vocabSize),
      unpadded(ref.f32('logits'), mask, model.config.vocabSize),
      1e-4,
      'logits',
    );
    note('worst hidden rel err', worst.toExponential(2));
    note('logits rel err', logitsErr.toExponential(2));
  } finally {
    await tmp.cleanup();
  }
}

async function greedy(name: string, { platform, fixture }: TestContext): Promise<void> {
  const tmp = tempStore(platform, `gen-${name}`);
  try {
    await copyFixtureCheckpoint(fixture, name, tmp.files, 'm');
    const model = await loadHfCheckpoint(tmp.files, 'm');
    const ref = new SafetensorsFile(await fixture(`hf/${name}/reference.safetensors`));
    const want = [...ref.i32('gen.new_token_ids')];
    assertDeepEqual(greedyGenerateReference(model, ref.i32('gen.prompt_ids'), want.length), want, `${name} greedy tokens`);
  } finally {
    await tmp.cleanup();
  }
}

export default defineSuite('reference/llama', (t) => {
  t.test('llama-tiny: hidden states and logits match HF within 1e-4', (ctx) => parity('llama-tiny', ctx));
  t.test('qwen2-tiny (q/k/v bias): hidden states and logits match HF within 1e-4', (ctx) => parity('qwen2-tiny', ctx));
  t.test('llama-tiny: greedy generation reproduces HF tokens', (ctx) => greedy('llama-tiny', ctx));
  t.test('qwen2-tiny: greedy generation reproduces HF tokens', (ctx) => greedy('qwen2-tiny', ctx));

  t.test('Qwen3-style random checkpoint: shapes, determinism, q/k norms matter', async ({ platform, note }) => {
    const tmp = tempStore(platform, 'ref-qwen3');
    try {
      // Same weights file under two configs: Qwen3 (q/k norms) and Llama (no norms, so those tensors go unused).
      await writeRandomCheckpoint(tmp.files, 'q3', qwen3Config(), 11);
      await tmp.files.writeAtomic('llama/model.safetensors', await tmp.files.read('q3/model.safetensors'));
      await tmp.files.writeAtomic(
        'llama/config.json',
        new TextEncoder().encode(JSON.stringify(qwen3Config({ architectures: ['LlamaForCausalLM'] }))),
      );
      const qwen3 = await loadHfCheckpoint(tmp.files, 'q3');
      const llama = await loadHfCheckpoint(tmp.files, 'llama');
      assertEqual(llama.unused.filter((n) => /q_norm|k_norm/.test(n)).length, 4, 'llama ignores the 2 layers × 2 norms');

      const input = {
        inputIds: [3, 17, 42, 0, 9, 9, 31, 2, 5, 1, 49, 8],
        batch: 2,
        seqLen: 6,
        attentionMask: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0],
      };
      const a = forwardReference(qwen3, input);
      const b = forwardReference(qwen3, input);
      assertEqual(a.hiddenStates.length, 3, 'embeddings + 2 layers');
      assert(
        a.hiddenStates.every((h) => h.length === 2 * 6 * 32),
        'hidden [2, 6, 32]',
      );
      assertEqual(a.logits.length, 2 * 6 * 50, 'logits [2, 6, 50]');
      assert(a.logits.every(Number.isFinite), 'finite logits');
      assertDeepEqual([...a.logits], [...b.logits], 'deterministic');

      const c = forwardReference(llama, input);
      assertDeepEqual([...c.hiddenStates[0]], [...a.hiddenStates[0]], 'same embeddings');
      const diff = relativeError(c.hiddenStates[1], a.hiddenStates[1]);
      note('qk-norm effect on layer 0 output', diff.toExponential(2));
      assert(diff > 1e-3, `q/k norms change layer 0's output (rel diff ${diff})`);

      // Tied embeddings: logits are the final hidden state against the embedding rows.
      const last = a.hiddenStates[2];
      let dot = 0;
      for (let j = 0; j < 32; j++) dot += last[j] * qwen3.weights.embedTokens[7 * 32 + j];
      assert(Math.abs(a.logits[7] - dot) < 1e-12, 'logit = final hidden · embedding row');

      // Padding only hides keys: row 0 (no padding) is unaffected by row 1's mask, and a row's real
      // positions do not depend on what sits in its padded slots.
      const swapped = forwardReference(qwen3, { ...input, inputIds: [...input.inputIds.slice(0, 10), 7, 7] });
      assertDeepEqual(
        [...swapped.logits.subarray(0, 2 * 6 * 50 - 2 * 50)],
        [...a.logits.subarray(0, 2 * 6 * 50 - 2 * 50)],
        'padded tokens do not leak',
      );
      assertEqual(greedyGenerateReference(qwen3, [3, 17, 42], 4).length, 4, 'generation length');
    } finally {
      await tmp.cleanup();
    }
  });
});
