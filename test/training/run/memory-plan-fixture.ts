/** The small target both memory-plan suites plan for, and the limits under which every tensor binds whole. */
import { parseHfConfig, type TargetModelConfig } from '../../../src/config/hf-config.ts';
import type { MemoryPlanInput } from '../../../src/training/run/memory-plan.ts';
import { draftConfigFor } from '../../../src/training/sequences/eagle3-data.ts';

const GiB = 2 ** 30;
export const BIG = { maxBufferSize: 4 * GiB, maxStorageBufferBindingSize: 2 * GiB };

/** A small Llama: H 64, 4 heads of 16 (2 KV heads), I 128, V 256, 2 layers; every size a power of two; `overrides` over its config.json. */
export function tinyTarget(overrides: Record<string, unknown> = {}): TargetModelConfig {
  return parseHfConfig(
    {
      architectures: ['LlamaForCausalLM'],
      hidden_size: 64,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 16,
      intermediate_size: 128,
      vocab_size: 256,
      rms_norm_eps: 1e-5,
      max_position_embeddings: 512,
      ...overrides,
    },
    'tiny config',
  );
}

/** A plan input for tinyTarget (no generation unless `generationBatch` is given), `overrides` over it. */
export function tinyInput(overrides: Partial<MemoryPlanInput> = {}): MemoryPlanInput {
  const target = tinyTarget();
  return {
    target,
    targetWeights: 'f32',
    draft: draftConfigFor({ config: target }, 64),
    batchSize: 2,
    maxLength: 64,
    tttLength: 3,
    features: 'f32',
    featureStoreSamples: 4,
    captureBatchTokens: 8192,
    generationBatch: 0,
    ...overrides,
  };
}
