/**
 * Hugging Face `config.json` → a typed, validated `TargetModelConfig` for the decoder-only target
 * models SpecLab can run: LlamaForCausalLM, Qwen2ForCausalLM (q/k/v biases) and Qwen3ForCausalLM
 * (per-head RMSNorm on q and k, explicit head_dim).
 *
 * Both generations of the RoPE fields are read: transformers ≤ 4 writes `rope_theta` plus an
 * optional `rope_scaling`, transformers 5 writes one `rope_parameters` object holding both.
 */
import { z } from 'zod';

export const SUPPORTED_ARCHITECTURES = ['LlamaForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM'] as const;
export type TargetArchitecture = (typeof SUPPORTED_ARCHITECTURES)[number];

export type RopeScaling =
  | { readonly type: 'default' }
  /** Positions divided by `factor` (equivalently every frequency divided by it). */
  | { readonly type: 'linear'; readonly factor: number }
  /** Llama 3.x: long wavelengths slowed by `factor`, short ones kept, a smooth blend in between. */
  | {
      readonly type: 'llama3';
      readonly factor: number;
      readonly lowFreqFactor: number;
      readonly highFreqFactor: number;
      readonly originalMaxPositionEmbeddings: number;
    };

export interface TargetModelConfig {
  readonly architecture: TargetArchitecture;
  readonly hiddenSize: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly intermediateSize: number;
  readonly vocabSize: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
  readonly ropeScaling: RopeScaling;
  readonly maxPositionEmbeddings: number;
  readonly tieWordEmbeddings: boolean;
  /** Biases on q/k/v projections (Qwen2 always; Llama and Qwen3 when `attention_bias`). */
  readonly qkvBias: boolean;
  /** Bias on the output projection (Llama and Qwen3 `attention_bias`; never Qwen2). */
  readonly oBias: boolean;
  /** Biases on gate/up/down (Llama `mlp_bias`). */
  readonly mlpBias: boolean;
  /** Per-head RMSNorm over head_dim on q and k before RoPE (Qwen3). */
  readonly qkNorm: boolean;
}

const posInt = z.number().int().positive();
/**
 * Upper bounds on declared sizes, far above any released model, checked before anything is
 * allocated: a hostile or corrupt config (num_hidden_layers 1e9) is refused at once, naming the
 * field, instead of exhausting memory while the expected-tensor list is built.
 */
export const CONFIG_BOUNDS = {
  hidden_size: 65_536,
  num_hidden_layers: 1024,
  num_attention_heads: 1024,
  head_dim: 1024,
  intermediate_size: 1_048_576,
  vocab_size: 4_194_304,
  max_position_embeddings: 16_777_216,
} as const;
const upTo = (field: keyof typeof CONFIG_BOUNDS) => posInt.max(CONFIG_BOUNDS[field]);
const ropeScalingSchema = z
  .object({
    rope_type: z.string().optional(),
    type: z.string().optional(),
    rope_theta: z.number().positive().optional(),
    factor: z.number().positive().optional(),
    low_freq_factor: z.number().positive().optional(),
    high_freq_factor: z.number().positive().optional(),
    original_max_position_embeddings: posInt.optional(),
  })
  .nullable()
  .optional();

const configSchema = z.object({
  architectures: z.array(z.string()).min(1),
  hidden_size: upTo('hidden_size'),
  num_hidden_layers: upTo('num_hidden_layers'),
  num_attention_heads: upTo('num_attention_heads'),
  num_key_value_heads: upTo('num_attention_heads').nullable().optional(),
  head_dim: upTo('head_dim').nullable().optional(),
  intermediate_size: upTo('intermediate_size'),
  vocab_size: upTo('vocab_size'),
  rms_norm_eps: z.number().positive().max(1),
  rope_theta: z.number().positive().max(1e12).optional(),
  rope_scaling: ropeScalingSchema,
  rope_parameters: ropeScalingSchema,
  max_position_embeddings: upTo('max_position_embeddings').optional(),
  tie_word_embeddings: z.boolean().optional(),
  attention_bias: z.boolean().optional(),
  mlp_bias: z.boolean().optional(),
  hidden_act: z.string().optional(),
  use_sliding_window: z.boolean().optional(),
});

/**
 * JSON text (or an already-parsed object) validated by `schema`; errors name `source` and every
 * offending field. Shared by the target and draft config parsers.
 */
export function parseConfigJson<S extends z.ZodType>(schema: S, input: string | unknown, source: string, what: string): z.output<S> {
  let json: unknown = input;
  if (typeof input === 'string') {
    try {
      json = JSON.parse(input);
    } catch (err) {
      throw new Error(`${source}: not valid JSON (${(err as Error).message})`, { cause: err });
    }
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`${source}: invalid ${what} (${issues})`);
  }
  return parsed.data;
}

/** Parses config.json text (or an already-parsed object); `source` names the file in errors. */
export function parseHfConfig(input: string | unknown, source = 'config.json'): TargetModelConfig {
  const c = parseConfigJson(configSchema, input, source, 'model config');
  const architecture = c.architectures[0];
  if (!(SUPPORTED_ARCHITECTURES as readonly string[]).includes(architecture)) {
    throw new Error(`${source}: unsupported architecture "${architecture}" (supported: ${SUPPORTED_ARCHITECTURES.join(', ')})`);
  }
  const arch = architecture as TargetArchitecture;
  if (c.hidden_act !== undefined && c.hidden_act !== 'silu')
    throw new Error(`${source}: hidden_act "${c.hidden_act}" is not supported (only silu)`);
  if (c.use_sliding_window) throw new Error(`${source}: sliding-window attention (use_sliding_window) is not supported`);

  const numHeads = c.num_attention_heads;
  const numKvHeads = c.num_key_value_heads ?? numHeads;
  if (numHeads % numKvHeads !== 0)
    throw new Error(`${source}: num_attention_heads ${numHeads} is not a multiple of num_key_value_heads ${numKvHeads}`);
  if (arch === 'Qwen3ForCausalLM' && c.head_dim == null) throw new Error(`${source}: Qwen3ForCausalLM needs an explicit head_dim`);
  const headDim = c.head_dim ?? c.hidden_size / numHeads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0)
    throw new Error(`${source}: head_dim ${headDim} must be an even integer (RoPE rotates pairs)`);

  const rope = c.rope_parameters ?? c.rope_scaling ?? null;
  const ropeTheta = c.rope_parameters?.rope_theta ?? c.rope_theta ?? 10000;
  const attentionBias = c.attention_bias ?? false;
  return {
    architecture: arch,
    hiddenSize: c.hidden_size,
    numLayers: c.num_hidden_layers,
    numHeads,
    numKvHeads,
    headDim,
    intermediateSize: c.intermediate_size,
    vocabSize: c.vocab_size,
    rmsNormEps: c.rms_norm_eps,
    ropeTheta,
    ropeScaling: parseRopeScaling(rope, source),
    maxPositionEmbeddings: c.max_position_embeddings ?? 2048,
    tieWordEmbeddings: c.tie_word_embeddings ?? false,
    qkvBias: arch === 'Qwen2ForCausalLM' ? true : attentionBias,
    oBias: arch === 'Qwen2ForCausalLM' ? false : attentionBias,
    mlpBias: arch === 'LlamaForCausalLM' ? (c.mlp_bias ?? false) : false,
    qkNorm: arch === 'Qwen3ForCausalLM',
  };
}

function parseRopeScaling(rope: z.infer<typeof ropeScalingSchema>, source: string): RopeScaling {
  const type = rope?.rope_type ?? rope?.type ?? 'default';
  const need = (value: number | undefined, field: string): number => {
    if (value === undefined) throw new Error(`${source}: rope scaling "${type}" needs ${field}`);
    return value;
  };
  switch (type) {
    case 'default':
      return { type: 'default' };
    case 'linear':
      return { type: 'linear', factor: need(rope?.factor, 'factor') };
    case 'llama3': {
      const scaling = {
        type: 'llama3' as const,
        factor: need(rope?.factor, 'factor'),
        lowFreqFactor: need(rope?.low_freq_factor, 'low_freq_factor'),
        highFreqFactor: need(rope?.high_freq_factor, 'high_freq_factor'),
        originalMaxPositionEmbeddings: need(rope?.original_max_position_embeddings, 'original_max_position_embeddings'),
      };
      if (scaling.highFreqFactor <= scaling.lowFreqFactor)
        throw new Error(`${source}: llama3 rope scaling needs high_freq_factor > low_freq_factor`);
      return scaling;
    }
    default:
      throw new Error(`${source}: rope scaling type "${type}" is not supported (supported: default, linear, llama3)`);
  }
}

/**
 * RoPE inverse frequencies for one head: theta^(−2i/d) for i < d/2, then rescaled as the config's
 * scaling asks. Computed in float64; HF computes them in float32 (differences ~1e-7 relative).
 */
export function ropeInverseFrequencies(config: Pick<TargetModelConfig, 'headDim' | 'ropeTheta' | 'ropeScaling'>): Float64Array {
  const { headDim, ropeTheta, ropeScaling: s } = config;
  const inv = new Float64Array(headDim / 2);
  for (let i = 0; i < inv.length; i++) inv[i] = 1 / ropeTheta ** ((2 * i) / headDim);
  if (s.type === 'linear') for (let i = 0; i < inv.length; i++) inv[i] /= s.factor;
  if (s.type === 'llama3') {
    const lowFreqWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
    const highFreqWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
    for (let i = 0; i < inv.length; i++) {
      const wavelen = (2 * Math.PI) / inv[i];
      if (wavelen > lowFreqWavelen) inv[i] /= s.factor;
      else if (wavelen >= highFreqWavelen) {
        const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        inv[i] = (1 - smooth) * (inv[i] / s.factor) + smooth * inv[i];
      }
    }
  }
  return inv;
}
