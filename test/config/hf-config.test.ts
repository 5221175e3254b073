/** config.json parsing: the fixtures, Qwen3 and transformers-4 field styles, RoPE scaling, and errors. */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { parseHfConfig, ropeInverseFrequencies } from '../../src/config/hf-config.ts';
import { qwen3Config } from '../model/synthetic-checkpoint.ts';

const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

export default defineSuite('config/hf-config', (t) => {
  t.test('fixture configs: llama-tiny and qwen2-tiny (transformers 5 rope_parameters)', async ({ fixture }) => {
    const llama = parseHfConfig(text(await fixture('hf/llama-tiny/config.json')), 'llama-tiny/config.json');
    assertDeepEqual(
      llama,
      {
        architecture: 'LlamaForCausalLM',
        hiddenSize: 64,
        numLayers: 6,
        numHeads: 4,
        numKvHeads: 2,
        headDim: 16,
        intermediateSize: 176,
        vocabSize: 384,
        rmsNormEps: 1e-6,
        ropeTheta: 10000,
        ropeScaling: { type: 'default' },
        maxPositionEmbeddings: 256,
        tieWordEmbeddings: false,
        qkvBias: false,
        oBias: false,
        mlpBias: false,
        qkNorm: false,
      },
      'llama-tiny',
    );
    const qwen2 = parseHfConfig(text(await fixture('hf/qwen2-tiny/config.json')));
    assertEqual(qwen2.architecture, 'Qwen2ForCausalLM', 'qwen2 architecture');
    assert(qwen2.qkvBias && !qwen2.oBias && !qwen2.qkNorm, 'qwen2 has q/k/v biases only');
  });

  t.test('Qwen3 with transformers-4 rope_theta, explicit head_dim, q/k norms', () => {
    const c = parseHfConfig(qwen3Config({ rope_scaling: { type: 'linear', factor: 4 } }));
    assertEqual(c.headDim, 12, 'explicit head_dim wins over hidden/heads');
    assertEqual(c.ropeTheta, 1000000, 'top-level rope_theta');
    assertDeepEqual(c.ropeScaling, { type: 'linear', factor: 4 }, 'linear scaling');
    assert(c.qkNorm && c.tieWordEmbeddings && !c.qkvBias, 'qwen3 flags');
    const inv = ropeInverseFrequencies(c);
    assertEqual(inv[1], 1 / 1000000 ** (2 / 12) / 4, 'linear scaling divides frequencies');
  });

  t.test('hostile sizes are refused at parse time, naming the field, before anything is allocated', () => {
    for (const layers of [1e9, 3e7, 1025]) {
      const started = performance.now();
      assertThrows(
        () => parseHfConfig(qwen3Config({ num_hidden_layers: layers }), 'big/config.json'),
        /big\/config\.json: invalid model config \(num_hidden_layers: Too big/,
        `num_hidden_layers ${layers}`,
      );
      assert(performance.now() - started < 100, `refused in ${(performance.now() - started).toFixed(1)} ms`);
    }
    assertThrows(() => parseHfConfig(qwen3Config({ vocab_size: 1e12 })), /vocab_size: Too big/, 'vocab_size');
    assertThrows(() => parseHfConfig(qwen3Config({ hidden_size: 2 ** 20 })), /hidden_size: Too big/, 'hidden_size');
    assertThrows(
      () => parseHfConfig(qwen3Config({ max_position_embeddings: 1e10 })),
      /max_position_embeddings: Too big/,
      'max_position_embeddings',
    );
    assertEqual(parseHfConfig(qwen3Config({ num_hidden_layers: 1024 })).numLayers, 1024, 'the bound itself is accepted');
  });

  t.test('llama3 rope scaling: high frequencies kept, low ones divided, middle blended', () => {
    const c = parseHfConfig({
      ...qwen3Config({ architectures: ['LlamaForCausalLM'], head_dim: 128, hidden_size: 512 }),
      rope_parameters: {
        rope_type: 'llama3',
        rope_theta: 500000,
        factor: 8,
        low_freq_factor: 1,
        high_freq_factor: 4,
        original_max_position_embeddings: 8192,
      },
    });
    assertEqual(c.ropeTheta, 500000, 'rope_theta from rope_parameters');
    const inv = ropeInverseFrequencies(c);
    const plain = ropeInverseFrequencies({ ...c, ropeScaling: { type: 'default' } });
    let kept = 0,
      divided = 0,
      blended = 0;
    for (let i = 0; i < inv.length; i++) {
      const wavelen = (2 * Math.PI) / plain[i];
      if (wavelen < 8192 / 4) {
        assertEqual(inv[i], plain[i], `short wavelength ${i} kept`);
        kept++;
      } else if (wavelen > 8192) {
        assert(Math.abs(inv[i] - plain[i] / 8) < 1e-18, `long wavelength ${i} divided by 8`);
        divided++;
      } else {
        assert(inv[i] < plain[i] && inv[i] > plain[i] / 8, `wavelength ${i} blended`);
        blended++;
      }
    }
    assert(kept > 0 && divided > 0 && blended > 0, `all three regimes exercised (${kept}/${blended}/${divided})`);
  });

  t.test('unsupported or invalid configs fail naming the problem', () => {
    const cases: [unknown, RegExp][] = [
      [qwen3Config({ architectures: ['MistralForCausalLM'] }), /cfg\.json: unsupported architecture "MistralForCausalLM"/],
      [qwen3Config({ hidden_size: undefined }), /cfg\.json: invalid model config \(hidden_size: /],
      [qwen3Config({ num_attention_heads: -4 }), /num_attention_heads/],
      [qwen3Config({ head_dim: undefined }), /Qwen3ForCausalLM needs an explicit head_dim/],
      [qwen3Config({ num_key_value_heads: 3 }), /not a multiple of num_key_value_heads 3/],
      [qwen3Config({ rope_scaling: { rope_type: 'yarn', factor: 4 } }), /rope scaling type "yarn" is not supported/],
      [qwen3Config({ rope_scaling: { rope_type: 'llama3', factor: 8 } }), /rope scaling "llama3" needs low_freq_factor/],
      [qwen3Config({ hidden_act: 'gelu' }), /hidden_act "gelu" is not supported/],
      [qwen3Config({ architectures: ['Qwen2ForCausalLM'], use_sliding_window: true }), /sliding-window attention/],
    ];
    for (const [json, pattern] of cases) assertThrows(() => parseHfConfig(json, 'cfg.json'), pattern, String(pattern));
    assertThrows(() => parseHfConfig('{"a":', 'cfg.json'), /cfg\.json: not valid JSON/, 'bad JSON text');
  });
});
