/**
 * EAGLE3 draft config (docs/eagle3.md §1): a `LlamaForCausalLMEagle3` config.json parsed into the
 * sizes the draft model, its float64 reference and its training strategy need, plus the parameter
 * table of docs/eagle3.md §2 (names exactly as SpecForge's state dict spells them, shapes out × in).
 *
 * Only the variant SpecForge trains by default is supported: one decoder layer, SiLU, plain RoPE,
 * `norm_output` true, no `fc_norm`. Anything else is refused with an error naming the field, rather
 * than silently trained as something it is not.
 */
import { z } from 'zod';
import { CONFIG_BOUNDS, parseConfigJson } from './hf-config.ts';

export interface Eagle3Config {
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  /** Target vocabulary V (rows of the frozen embedding, width of the target logits). */
  readonly vocabSize: number;
  /** Draft vocabulary D (rows of lm_head). */
  readonly draftVocabSize: number;
  /** Target hidden size Ht: fc maps 3·Ht → H. */
  readonly targetHiddenSize: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
  readonly maxPositionEmbeddings: number;
}

const posInt = z.number().int().positive();
/** The target's bounds (CONFIG_BOUNDS) apply to the draft's declared sizes too. */
const upTo = (field: keyof typeof CONFIG_BOUNDS) => posInt.max(CONFIG_BOUNDS[field]);
const schema = z.object({
  architectures: z.array(z.string()).min(1).optional(),
  hidden_size: upTo('hidden_size'),
  intermediate_size: upTo('intermediate_size'),
  num_attention_heads: upTo('num_attention_heads'),
  num_key_value_heads: upTo('num_attention_heads').nullable().optional(),
  head_dim: upTo('head_dim').nullable().optional(),
  num_hidden_layers: upTo('num_hidden_layers').optional(),
  vocab_size: upTo('vocab_size'),
  draft_vocab_size: upTo('vocab_size').nullable().optional(),
  target_hidden_size: upTo('hidden_size').nullable().optional(),
  rms_norm_eps: z.number().positive().max(1),
  rope_theta: z.number().positive().max(1e12).optional(),
  rope_scaling: z.unknown().optional(),
  max_position_embeddings: upTo('max_position_embeddings').optional(),
  hidden_act: z.string().optional(),
  fc_norm: z.boolean().optional(),
  norm_output: z.boolean().optional(),
});

/** Parse a draft config.json (text or object); `source` names the file in errors. */
export function parseEagle3Config(input: string | unknown, source = 'draft config'): Eagle3Config {
  const c = parseConfigJson(schema, input, source, 'EAGLE3 draft config');
  const arch = c.architectures?.[0];
  if (arch !== undefined && arch !== 'LlamaForCausalLMEagle3')
    throw new Error(`${source}: architecture "${arch}" is not LlamaForCausalLMEagle3`);
  if (c.num_hidden_layers !== undefined && c.num_hidden_layers !== 1)
    throw new Error(`${source}: num_hidden_layers must be 1 for an EAGLE3 draft, got ${c.num_hidden_layers}`);
  if (c.hidden_act !== undefined && c.hidden_act !== 'silu')
    throw new Error(`${source}: hidden_act "${c.hidden_act}" is not supported (only silu)`);
  if (c.fc_norm) throw new Error(`${source}: fc_norm (Eagle3.1 per-chunk norms before fc) is not supported`);
  if (c.norm_output === false) throw new Error(`${source}: norm_output=false is not supported (logits are taken after the final norm)`);
  if (c.rope_scaling !== undefined && c.rope_scaling !== null)
    throw new Error(`${source}: rope_scaling is not supported by the draft (plain RoPE only)`);
  const numKvHeads = c.num_key_value_heads ?? c.num_attention_heads;
  if (c.num_attention_heads % numKvHeads !== 0)
    throw new Error(`${source}: num_attention_heads ${c.num_attention_heads} is not a multiple of num_key_value_heads ${numKvHeads}`);
  const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) throw new Error(`${source}: head_dim ${headDim} must be an even integer`);
  const draftVocabSize = c.draft_vocab_size ?? c.vocab_size;
  if (draftVocabSize > c.vocab_size) throw new Error(`${source}: draft_vocab_size ${draftVocabSize} exceeds vocab_size ${c.vocab_size}`);
  return {
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHeads: c.num_attention_heads,
    numKvHeads,
    headDim,
    vocabSize: c.vocab_size,
    draftVocabSize,
    targetHiddenSize: c.target_hidden_size ?? c.hidden_size,
    rmsNormEps: c.rms_norm_eps,
    ropeTheta: c.rope_theta ?? 10000,
    maxPositionEmbeddings: c.max_position_embeddings ?? 2048,
  };
}

/** The frozen embedding: copied from the target, never trained, never saved. */
export const EMBED_NAME = 'embed_tokens.weight';

/** Trainable parameters in SpecForge's state-dict order with their [out, in] (or [n]) shapes. */
export function eagle3ParameterShapes(c: Eagle3Config): [string, number[]][] {
  const H = c.hiddenSize;
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  return [
    ['fc.weight', [H, 3 * c.targetHiddenSize]],
    ['midlayer.hidden_norm.weight', [H]],
    ['midlayer.input_layernorm.weight', [H]],
    ['midlayer.self_attn.q_proj.weight', [qDim, 2 * H]],
    ['midlayer.self_attn.k_proj.weight', [kvDim, 2 * H]],
    ['midlayer.self_attn.v_proj.weight', [kvDim, 2 * H]],
    ['midlayer.self_attn.o_proj.weight', [H, qDim]],
    ['midlayer.post_attention_layernorm.weight', [H]],
    ['midlayer.mlp.gate_proj.weight', [c.intermediateSize, H]],
    ['midlayer.mlp.up_proj.weight', [c.intermediateSize, H]],
    ['midlayer.mlp.down_proj.weight', [H, c.intermediateSize]],
    ['norm.weight', [H]],
    ['lm_head.weight', [c.draftVocabSize, H]],
  ];
}

/** SpecForge's per-step loss weight: total = Σ_k decay^k · ploss_k. */
export const PLOSS_DECAY = 0.8;
