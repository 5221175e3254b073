/**
 * The speculators-format export (src/model/eagle3/export-speculators.ts), checked against what vLLM
 * does with it, as read in vllm-project/vllm: `model_executor/models/llama_eagle3.py` at 00bd149
 * (Eagle3LlamaForCausalLM's parameters and `load_weights`), `transformers_utils/config.py` at 0036026
 * (the speculators parser, chosen by `speculators_config` when there is no top-level `model_type`),
 * `transformers_utils/configs/speculators/base.py` at 052316a (what is validated, the proposal count)
 * and `algos.py`'s `update_eagle3` (a missing `norm_before_residual` is true in every version read);
 * and against vllm-project/speculators at c05b95b (`Eagle3SpeculatorConfig`, the converter's
 * `midlayer.` → `layers.0.` rename). Read, not run: no vLLM server here.
 *
 *   - config.json routes to vLLM's speculators parser and gives Eagle3LlamaForCausalLM the draft's
 *     sizes, norm_before_residual false, vLLM's aux layer ids (SpecLab's + 1), and a proposal count;
 *   - every tensor lands on exactly one parameter of Eagle3LlamaForCausalLM with its shape, once q/k/v
 *     and gate/up are stacked as vLLM stacks them, with no parameter left unloaded but the embedding
 *     (taken from the target); the bytes are the SGLang export's, renamed;
 *   - bad options are refused before anything is written.
 */
import { parseEagle3Config, type Eagle3Config } from '../../src/config/eagle3-config.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { eagle3SglangSafetensors } from '../../src/model/eagle3/export.ts';
import {
  eagle3SpeculatorsConfig,
  eagle3SpeculatorsSafetensors,
  speculatorsTensorName,
  writeEagle3SpeculatorsExport,
  type SpeculatorsExportOptions,
} from '../../src/model/eagle3/export-speculators.ts';
import { eagle3ParameterShapes } from '../../src/config/eagle3-config.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';

/** A draft whose target is wider than the draft (fc reads 3 × 24) and whose vocabulary is cut to 16 of 40. */
const CONFIG: Eagle3Config = parseEagle3Config({
  hidden_size: 32,
  intermediate_size: 48,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  vocab_size: 40,
  draft_vocab_size: 16,
  target_hidden_size: 24,
  rms_norm_eps: 1e-5,
  max_position_embeddings: 128,
});
const OPTIONS: SpeculatorsExportOptions = {
  verifier: { nameOrPath: 'speclab-test/target', architectures: ['LlamaForCausalLM'] },
  speculativeTokens: 4,
  auxLayerIds: [1, 4, 8],
};

function draft(c: Eagle3Config): { weights: Record<string, Float32Array>; vocab: { t2d: Int32Array; d2t: Int32Array } } {
  const rng = new Rng(7);
  const weights: Record<string, Float32Array> = {};
  for (const [name, shape] of eagle3ParameterShapes(c))
    weights[name] = rng.floats(
      shape.reduce((a, b) => a * b, 1),
      0.2,
    );
  // Every other target token is in the draft vocabulary: d2t[i] = target(i) − i = i.
  const t2d = Int32Array.from({ length: c.vocabSize }, (_, v) => (v % 2 === 0 && v / 2 < c.draftVocabSize ? 1 : 0));
  const d2t = Int32Array.from({ length: c.draftVocabSize }, (_, i) => i);
  return { weights, vocab: { t2d, d2t } };
}

/** The config vLLM builds for the draft from a speculators config.json (its speculators parser and update_eagle3). */
function vllmDraftConfig(json: Record<string, unknown>): Record<string, unknown> {
  assert(json.model_type === undefined, 'no top-level model_type: vLLM then picks its speculators parser from speculators_config');
  assert(json.speculators_config !== undefined, 'speculators_config present');
  assertEqual(json.speculators_model_type, 'eagle3', 'speculators_model_type: a type vLLM registers');
  const spec = json.speculators_config as { proposal_methods: { speculative_tokens?: number }[]; verifier: { name_or_path?: string } };
  assert(typeof spec.proposal_methods[0].speculative_tokens === 'number', 'proposal_methods[0].speculative_tokens (vLLM validates it)');
  assert(typeof spec.verifier.name_or_path === 'string', 'verifier.name_or_path (what `vllm serve <draft>` loads)');
  const layer = json.transformer_layer_config as Record<string, unknown>;
  assert(layer !== null && typeof layer === 'object' && !Array.isArray(layer), 'transformer_layer_config is a dict');
  const out: Record<string, unknown> = { ...layer, draft_vocab_size: json.draft_vocab_size };
  if (json.target_hidden_size !== undefined && json.target_hidden_size !== null) out.target_hidden_size = json.target_hidden_size;
  out.norm_before_residual = json.norm_before_residual ?? true;
  // A llama decoder layer routes to the Llama EAGLE3 drafter.
  out.architectures = [String(layer.model_type).includes('llama') ? 'Eagle3LlamaForCausalLM' : 'unknown'];
  if (json.eagle_aux_hidden_state_layer_ids) out.eagle_aux_hidden_state_layer_ids = json.eagle_aux_hidden_state_layer_ids;
  out.num_lookahead_tokens = spec.proposal_methods[0].speculative_tokens;
  return out;
}

/** Eagle3LlamaForCausalLM's parameters (names as vLLM's module tree spells them) and shapes, for a draft config. */
function vllmParameters(c: Eagle3Config): Map<string, number[]> {
  const [H, I, hd] = [c.hiddenSize, c.intermediateSize, c.headDim];
  const L = 'model.layers.0.';
  return new Map<string, number[]>([
    ['model.fc.weight', [H, 3 * c.targetHiddenSize]],
    [`${L}self_attn.qkv_proj.weight`, [(c.numHeads + 2 * c.numKvHeads) * hd, 2 * H]],
    [`${L}self_attn.o_proj.weight`, [H, c.numHeads * hd]],
    [`${L}mlp.gate_up_proj.weight`, [2 * I, H]],
    [`${L}mlp.down_proj.weight`, [H, I]],
    [`${L}input_layernorm.weight`, [H]],
    [`${L}hidden_norm.weight`, [H]],
    [`${L}post_attention_layernorm.weight`, [H]],
    ['model.norm.weight', [H]],
    ['lm_head.weight', [c.draftVocabSize, H]],
    ['draft_id_to_target_id', [c.draftVocabSize]],
  ]);
}

/** The parameter each file tensor loads into as vLLM's load_weights maps names (t2d skipped, shards stacked on rows). */
function vllmLoad(file: SafetensorsFile): Map<string, number[]> {
  const loaded = new Map<string, number[]>();
  const stacked: [string, string][] = [
    ['.q_proj', '.qkv_proj'],
    ['.k_proj', '.qkv_proj'],
    ['.v_proj', '.qkv_proj'],
    ['.gate_proj', '.gate_up_proj'],
    ['.up_proj', '.gate_up_proj'],
  ];
  for (const name of file.names) {
    if (name.includes('t2d')) continue;
    let param = name.includes('d2t') ? name.replace('d2t', 'draft_id_to_target_id') : name.includes('lm_head') ? name : `model.${name}`;
    param = param.replace('midlayer.', 'layers.0.');
    const shard = stacked.find(([from]) => param.includes(from));
    const shape = [...file.shape(name)];
    if (shard) {
      param = param.replace(shard[0], shard[1]);
      const had = loaded.get(param);
      if (had) {
        assertEqual(had[1], shape[1], `${name}: the stacked shards share their input width`);
        shape[0] += had[0];
      }
    } else assert(!loaded.has(param), `${param} loaded twice`);
    loaded.set(param, shape);
  }
  return loaded;
}

export default defineSuite('model/eagle3-export-speculators', (t) => {
  t.test('config.json: vLLM reads the speculators config, the draft sizes, norm_before_residual false and its own layer ids', () => {
    const json = eagle3SpeculatorsConfig(CONFIG, OPTIONS);
    assertDeepEqual(json.architectures, ['Eagle3Speculator'], 'architectures');
    const spec = json.speculators_config as Record<string, unknown>;
    assertEqual(spec.algorithm, 'eagle3', 'algorithm');
    assertEqual(spec.default_proposal_method, 'greedy', 'default_proposal_method');
    assertDeepEqual(
      spec.proposal_methods,
      [{ proposal_type: 'greedy', speculative_tokens: 4, verifier_accept_k: 1, accept_tolerance: 0 }],
      'one greedy method',
    );
    assertDeepEqual(spec.verifier, { name_or_path: 'speclab-test/target', architectures: ['LlamaForCausalLM'] }, 'verifier');
    for (const key of ['norm_before_residual', 'norm_before_fc', 'fc_norm', 'norm_output'])
      assert(json[key] === false, `${key}: false, written (vLLM's default for norm_before_residual is true)`);

    const vllm = vllmDraftConfig(json);
    assertDeepEqual(vllm.architectures, ['Eagle3LlamaForCausalLM'], 'the Llama EAGLE3 drafter');
    assertEqual(vllm.norm_before_residual, false, 'the residual is the raw hidden state, as the draft trained');
    assertDeepEqual(vllm.eagle_aux_hidden_state_layer_ids, [2, 5, 9], "vLLM's ids: the layer whose input is captured");
    assertEqual(vllm.num_lookahead_tokens, 4, 'proposal count');
    const expected: Record<string, unknown> = {
      model_type: 'llama',
      vocab_size: 40,
      draft_vocab_size: 16,
      target_hidden_size: 24,
      hidden_size: 32,
      intermediate_size: 48,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 8,
      num_hidden_layers: 1,
      hidden_act: 'silu',
      rms_norm_eps: 1e-5,
      max_position_embeddings: 128,
      tie_word_embeddings: false,
      attention_bias: false,
      mlp_bias: false,
    };
    for (const [key, value] of Object.entries(expected)) assertEqual(vllm[key], value, `vLLM's draft config: ${key}`);
    const layer = json.transformer_layer_config as Record<string, unknown>;
    for (const key of ['architectures', 'draft_vocab_size', 'target_hidden_size', 'eagle_config'])
      assert(!(key in layer), `transformer_layer_config has no ${key} (the speculator's top level holds it)`);
    assert(
      !('eagle_aux_hidden_state_layer_ids' in eagle3SpeculatorsConfig(CONFIG, { ...OPTIONS, auxLayerIds: undefined })),
      'no ids: the default',
    );
  });

  t.test(
    "model.safetensors: each tensor loads one of Eagle3LlamaForCausalLM's parameters at its shape; the bytes are the SGLang export's",
    () => {
      const { weights, vocab } = draft(CONFIG);
      const file = new SafetensorsFile(eagle3SpeculatorsSafetensors(CONFIG, weights, vocab), 'speculators');
      assertDeepEqual(file.names, [...file.names].sort(), 'keys sorted');
      assertDeepEqual(file.header.metadata, { format: 'pt' }, 'metadata');
      assert(
        !file.names.some((n) => n.startsWith('midlayer.') || n.includes('embed_tokens')),
        `no midlayer. key, no embedding: ${file.names}`,
      );
      assertDeepEqual(
        [...vllmLoad(file).entries()].sort(),
        [...vllmParameters(CONFIG).entries()].sort(),
        'every parameter but the embedding loaded, at its shape',
      );
      assertEqual(file.entry('d2t').dtype, 'I64', 'd2t int64');
      assertEqual(file.entry('t2d').dtype, 'BOOL', 't2d bool');
      assertDeepEqual([...file.i32('d2t')], [...vocab.d2t], 'd2t values');

      const sglang = new SafetensorsFile(eagle3SglangSafetensors(CONFIG, weights, vocab), 'sglang');
      assertDeepEqual(sglang.names.map(speculatorsTensorName).sort(), file.names, 'the same tensors, renamed');
      for (const name of sglang.names) {
        const [a, b] = [sglang.raw(name), file.raw(speculatorsTensorName(name))];
        assert(sglang.entry(name).dtype === file.entry(speculatorsTensorName(name)).dtype, `${name}: dtype`);
        assert(a.length === b.length && a.every((x, i) => x === b[i]), `${name}: the SGLang export's bytes`);
      }
    },
  );

  t.test('bad options and a broken vocabulary are refused before a file is written', async ({ platform }) => {
    const { weights, vocab } = draft(CONFIG);
    assertThrows(() => eagle3SpeculatorsConfig(CONFIG, { ...OPTIONS, speculativeTokens: 0 }), /speculative_tokens 0/, 'no proposal');
    assertThrows(
      () => eagle3SpeculatorsConfig(CONFIG, { ...OPTIONS, verifier: { nameOrPath: ' ', architectures: [] } }),
      /verifier name_or_path is empty/,
      'no verifier',
    );
    const tmp = tempStore(platform, 'speculators-refused');
    try {
      const broken = { t2d: vocab.t2d, d2t: Int32Array.from(vocab.d2t, (x, i) => (i === 3 ? x + 1 : x)) };
      await assertRejects(() => writeEagle3SpeculatorsExport(tmp.files, 'out', CONFIG, weights, broken, OPTIONS), /d2t\[3\]/, 'vocabulary');
      await assertRejects(
        () => writeEagle3SpeculatorsExport(tmp.files, 'out', CONFIG, weights, vocab, { ...OPTIONS, speculativeTokens: 1.5 }),
        /speculative_tokens 1\.5/,
        'fractional proposal',
      );
      assertDeepEqual(await tmp.files.list('out'), [], 'nothing written');
      await writeEagle3SpeculatorsExport(tmp.files, 'out', CONFIG, weights, vocab, OPTIONS);
      assertDeepEqual((await tmp.files.list('out')).sort(), ['config.json', 'model.safetensors'], 'written');
    } finally {
      await tmp.cleanup();
    }
  });
});
