/** Test helpers: copy a fixture checkpoint into a FileStore, and write random checkpoints of any config. */
import type { FileStore } from '../../src/ports/storage.ts';
import { Rng } from '../../src/util/random.ts';
import { f32ToBf16, type SafetensorsDType } from '../../src/formats/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/formats/safetensors-writer.ts';
import { expectedTensors } from '../../src/formats/hf-checkpoint-source.ts';
import { parseHfConfig } from '../../src/config/hf-config.ts';

export async function copyFixtureCheckpoint(
  fixture: (path: string) => Promise<Uint8Array>,
  name: string,
  store: FileStore,
  dir: string,
): Promise<void> {
  for (const file of ['config.json', 'model.safetensors']) await store.writeAtomic(`${dir}/${file}`, await fixture(`hf/${name}/${file}`));
}

/** A small Qwen3 config.json (q/k norms, explicit head_dim, tied embeddings). */
export function qwen3Config(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    architectures: ['Qwen3ForCausalLM'],
    hidden_size: 32,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 12,
    intermediate_size: 48,
    vocab_size: 50,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    rope_scaling: null,
    max_position_embeddings: 128,
    tie_word_embeddings: true,
    attention_bias: false,
    hidden_act: 'silu',
    ...overrides,
  };
}

export function encodeTensor(values: Float32Array, shape: readonly number[], dtype: SafetensorsDType): TensorToWrite {
  if (dtype === 'BF16') return { dtype, shape, data: new Uint8Array(Uint16Array.from(values, f32ToBf16).buffer) };
  if (dtype === 'F32') return { dtype, shape, data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) };
  throw new Error(`encodeTensor: ${dtype} not supported by this helper`);
}

/**
 * Writes config.json + model.safetensors with seeded random weights for every tensor the config
 * implies (norm weights around 1 so they matter without dominating).
 */
export async function writeRandomCheckpoint(
  store: FileStore,
  dir: string,
  config: Record<string, unknown>,
  seed: number,
  dtype: SafetensorsDType = 'F32',
): Promise<void> {
  const rng = new Rng(seed);
  const tensors: Record<string, TensorToWrite> = {};
  for (const t of expectedTensors(parseHfConfig(config))) {
    if (!t.required) continue;
    const n = t.shape.reduce((a, d) => a * d, 1);
    const values = t.name.endsWith('norm.weight') ? Float32Array.from({ length: n }, () => 1 + 0.3 * rng.normal()) : rng.floats(n, 0.2);
    tensors[t.name] = encodeTensor(values, t.shape, dtype);
  }
  await store.writeAtomic(`${dir}/config.json`, new TextEncoder().encode(JSON.stringify(config)));
  await store.writeAtomic(`${dir}/model.safetensors`, writeSafetensors(tensors));
}
