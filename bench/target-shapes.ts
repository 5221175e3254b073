/**
 * Published model shapes with random weights, for target-model throughput without a download.
 *
 * The config goes through the same parser as a real config.json (so RoPE scaling, tied embeddings
 * and head sizes are exactly what a checkpoint of that model would get). The weights are produced
 * lazily: every weight array is a getter that generates its values when `uploadTargetWeights` reads
 * it, and nothing keeps the array afterwards, so a 1.24B-parameter model (4.9 GB of f32) never has
 * more than one tensor (at most the 1 GB embedding) in JS memory at once.
 */
import type { LayerWeights, TargetCheckpoint, TargetWeights } from '../src/formats/hf-checkpoint.ts';
import { parseHfConfig, type TargetModelConfig } from '../src/config/hf-config.ts';
import { Rng } from '../src/util/random.ts';

/** config.json fields of the shapes the benchmarks know, as Hugging Face publishes them. */
const SHAPES: Readonly<Record<string, Record<string, unknown>>> = {
  // meta-llama/Llama-3.2-1B config.json (architecture fields only).
  'llama-3.2-1b': {
    architectures: ['LlamaForCausalLM'],
    hidden_size: 2048,
    num_hidden_layers: 16,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    head_dim: 64,
    intermediate_size: 8192,
    vocab_size: 128256,
    rms_norm_eps: 1e-5,
    rope_theta: 500000,
    rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
    max_position_embeddings: 131072,
    tie_word_embeddings: true,
    attention_bias: false,
    mlp_bias: false,
    hidden_act: 'silu',
  },
  // Qwen/Qwen3-0.6B config.json (architecture fields only): q/k norms, tied embeddings, vocab 151,936.
  'qwen3-0.6b': {
    architectures: ['Qwen3ForCausalLM'],
    hidden_size: 1024,
    num_hidden_layers: 28,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    intermediate_size: 3072,
    vocab_size: 151936,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    rope_scaling: null,
    max_position_embeddings: 40960,
    tie_word_embeddings: true,
    attention_bias: false,
    hidden_act: 'silu',
    bos_token_id: 151643,
    eos_token_id: 151645,
  },
};

export const TARGET_SHAPES: readonly string[] = Object.keys(SHAPES);

/** The config.json fields of a named shape, as published. */
export function shapeJson(name: string): Record<string, unknown> {
  const json = SHAPES[name];
  if (!json) throw new Error(`unknown target shape "${name}" (known: ${TARGET_SHAPES.join(', ')})`);
  return { ...json };
}

/**
 * The config of a named shape; `layers` overrides num_hidden_layers (a clearly smaller variant, for
 * when the full model cannot run).
 */
export function shapeConfig(name: string, layers?: number): TargetModelConfig {
  const json = SHAPES[name];
  if (!json) throw new Error(`unknown target shape "${name}" (known: ${TARGET_SHAPES.join(', ')})`);
  return parseHfConfig(layers === undefined ? json : { ...json, num_hidden_layers: layers }, `shape ${name}`);
}

/**
 * A checkpoint of `config` whose weights are generated on access: Linear and embedding weights
 * uniform with standard deviation 0.02 (HF's initializer_range), RMSNorm weights 1. Each access
 * generates a fresh array (from the tensor's own seed, so values are repeatable); read each weight once.
 */
export function randomCheckpoint(config: TargetModelConfig, seed = 1): Pick<TargetCheckpoint, 'config' | 'weights'> {
  const c = config;
  const H = c.hiddenSize;
  const qw = c.numHeads * c.headDim;
  const kvw = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  // Uniform on [−a, a] has standard deviation a/√3.
  const scale = 0.02 * Math.sqrt(3);
  let tensorSeed = seed;
  // Each tensor gets its seed when it is declared, so its values do not depend on the read order.
  const random = (n: number): (() => Float32Array) => {
    const own = tensorSeed++ * 7919 + 17;
    return () => new Rng(own).floats(n, scale);
  };
  const ones = (n: number) => (): Float32Array => new Float32Array(n).fill(1);
  const lazy = <T extends object>(getters: Record<string, () => Float32Array>): T => {
    const out = {};
    for (const [name, make] of Object.entries(getters)) Object.defineProperty(out, name, { get: make, enumerable: true });
    return out as T;
  };
  if (c.qkvBias || c.oBias || c.mlpBias || c.qkNorm)
    throw new Error(`randomCheckpoint: biases and q/k norms are not generated (shape ${c.architecture})`);
  const layers = Array.from({ length: c.numLayers }, () =>
    lazy<LayerWeights>({
      inputNorm: ones(H),
      qProj: random(qw * H),
      kProj: random(kvw * H),
      vProj: random(kvw * H),
      oProj: random(H * qw),
      postAttentionNorm: ones(H),
      gateProj: random(I * H),
      upProj: random(I * H),
      downProj: random(H * I),
    }),
  );
  const weights = lazy<TargetWeights>({
    embedTokens: random(c.vocabSize * H),
    finalNorm: ones(H),
    lmHead: c.tieWordEmbeddings
      ? () => {
          // Under tied embeddings the upload reuses the embedding tensor and never reads lm_head;
          // generating a second 1 GB table here would only waste memory.
          throw new Error('randomCheckpoint: lm_head is tied to embed_tokens; read embedTokens');
        }
      : random(c.vocabSize * H),
  });
  Object.defineProperty(weights, 'layers', { value: layers, enumerable: true });
  return { config: c, weights };
}
