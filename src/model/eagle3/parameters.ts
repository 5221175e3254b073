/**
 * The EAGLE3 draft's tensors on the GPU (docs/eagle3.md §2): every trainable weight registered in
 * the AdamWBackend under its SpecForge name (so gradients, moments and checkpoints use the names the
 * exporter expects), plus what is not trained — the frozen target embedding, the vocabulary
 * mapping buffers (t2d as i32 0/1 [V], `used` = d2t + arange(D) as i32 [D]) and the RoPE tables.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import { fmtShape, type Tensor } from '../../gpu/tensor.ts';
import { stackedRows } from '../../gpu/tensor-views.ts';
import type { Rng } from '../../util/random.ts';
import { usedFromD2t } from './vocab-mapping.ts';
import type { AdamWBackend, Parameter } from '../../optim/adamw-backend.ts';
import { EMBED_NAME, eagle3ParameterShapes, type Eagle3Config } from '../../config/eagle3-config.ts';
import { Eagle3Rope } from './rope.ts';

/** Short handles for the trainable weights, used by the forward and backward. */
export interface Eagle3Weights {
  fc: Parameter;
  hiddenNorm: Parameter;
  inputNorm: Parameter;
  q: Parameter;
  k: Parameter;
  v: Parameter;
  o: Parameter;
  postNorm: Parameter;
  gate: Parameter;
  up: Parameter;
  down: Parameter;
  norm: Parameter;
  lmHead: Parameter;
}

const HANDLE: Readonly<Record<string, keyof Eagle3Weights>> = {
  'fc.weight': 'fc',
  'midlayer.hidden_norm.weight': 'hiddenNorm',
  'midlayer.input_layernorm.weight': 'inputNorm',
  'midlayer.self_attn.q_proj.weight': 'q',
  'midlayer.self_attn.k_proj.weight': 'k',
  'midlayer.self_attn.v_proj.weight': 'v',
  'midlayer.self_attn.o_proj.weight': 'o',
  'midlayer.post_attention_layernorm.weight': 'postNorm',
  'midlayer.mlp.gate_proj.weight': 'gate',
  'midlayer.mlp.up_proj.weight': 'up',
  'midlayer.mlp.down_proj.weight': 'down',
  'norm.weight': 'norm',
  'lm_head.weight': 'lmHead',
};

export interface Eagle3Vocab {
  /** [V] 0/1 (SpecForge's bool buffer). */
  t2d: ArrayLike<number>;
  /** [D] offsets: target id = draft id + d2t[draft id]. */
  d2t: ArrayLike<number>;
}

/** Frozen tensors a draft may share instead of holding its own copy. */
export interface Eagle3Frozen {
  /**
   * The target's own embedding table [V, H] on the same device (f32, or f16 storage: the lookup
   * widens it exactly), borrowed, never released by the draft: with it `values` need not carry
   * `embed_tokens.weight`, and a real vocabulary's table is neither copied on the host nor held twice on the GPU.
   */
  readonly embed?: Tensor;
}

export class Eagle3Parameters {
  readonly weights: Eagle3Weights;
  /** Frozen target embedding [V, H] (may be split into row parts for a large vocabulary; f16 when shared from an f16 target). */
  readonly embed: Tensor;
  /** Whether `embed` was uploaded here (released by destroy) or borrowed (Eagle3Frozen.embed). */
  private readonly ownsEmbed: boolean;
  readonly t2d: Tensor;
  readonly used: Tensor;
  /** RoPE (cos, ±sin) tables, grown to the longest sequence seen. */
  readonly rope: Eagle3Rope;
  /**
   * [2I, H] views of the gate and up projections stacked (value and grad), where the arena placed
   * them back to back (tensor-views.ts stackedRows): the MLP then runs one projection for both. Undefined
   * where it did not (a row size off the arena's alignment, or a slab boundary between them).
   */
  readonly gateUp: { value: Tensor; grad: Tensor } | undefined;
  /** [qDim + 2·kvDim, 2H] views of the q, k and v projections stacked, likewise (the attention's one projection). */
  readonly qkv: { value: Tensor; grad: Tensor } | undefined;

  /**
   * Upload `values` (every name of eagle3ParameterShapes, plus `embed_tokens.weight` unless
   * `frozen.embed` shares the target's table) and register the trainable ones in `backend`. Lengths
   * are checked against the config, naming the tensor.
   */
  constructor(
    private readonly gpu: Gpu,
    backend: AdamWBackend,
    readonly config: Eagle3Config,
    values: Readonly<Record<string, ArrayLike<number>>>,
    vocab: Eagle3Vocab,
    frozen: Eagle3Frozen = {},
  ) {
    const c = config;
    const need = (name: string, shape: readonly number[]): ArrayLike<number> => {
      const v = values[name];
      if (!v) throw new Error(`Eagle3Parameters: missing ${name}`);
      const n = shape.reduce((a, b) => a * b, 1);
      if (v.length !== n) throw new Error(`Eagle3Parameters: ${name} has ${v.length} values, shape [${shape.join(', ')}] needs ${n}`);
      return v;
    };
    if (vocab.t2d.length !== c.vocabSize)
      throw new Error(`Eagle3Parameters: t2d has ${vocab.t2d.length} entries, vocab_size is ${c.vocabSize}`);
    if (vocab.d2t.length !== c.draftVocabSize)
      throw new Error(`Eagle3Parameters: d2t has ${vocab.d2t.length} entries, draft_vocab_size is ${c.draftVocabSize}`);
    const used = usedFromD2t(vocab.d2t, c.vocabSize);
    for (let i = 0; i < used.length; i++) {
      if (!vocab.t2d[used[i]]) throw new Error(`Eagle3Parameters: d2t maps draft id ${i} to target ${used[i]}, which t2d does not mark`);
    }
    let marked = 0;
    for (let i = 0; i < vocab.t2d.length; i++) if (vocab.t2d[i]) marked++;
    if (marked !== c.draftVocabSize)
      throw new Error(`Eagle3Parameters: t2d marks ${marked} tokens, draft_vocab_size is ${c.draftVocabSize}`);

    // Check every value before allocating anything, so a bad checkpoint leaks no GPU memory.
    const embedShape = [c.vocabSize, c.hiddenSize];
    const shared = frozen.embed;
    if (shared && (shared.shape.join() !== embedShape.join() || (shared.dtype !== 'f32' && shared.dtype !== 'f16')))
      throw new Error(
        `Eagle3Parameters: the shared embedding ${shared.label} is ${shared.dtype}${fmtShape(shared.shape)}, the draft needs f32 or f16 ${fmtShape(embedShape)}`,
      );
    const embed = shared ? undefined : need(EMBED_NAME, embedShape);
    const trainable = eagle3ParameterShapes(c).map(([name, shape]) => ({ name, shape, init: need(name, shape) }));
    this.ownsEmbed = embed !== undefined;
    this.embed = shared ?? gpu.upload(embedShape, 'f32', embed!, EMBED_NAME);
    this.t2d = gpu.upload(
      [c.vocabSize],
      'i32',
      Int32Array.from(vocab.t2d, (x) => (x ? 1 : 0)),
      't2d',
    );
    this.used = gpu.upload([c.draftVocabSize], 'i32', used, 'used');
    this.rope = new Eagle3Rope(gpu, c);
    const handles: Partial<Eagle3Weights> = {};
    for (const p of backend.addParameters(trainable)) handles[HANDLE[p.name]] = p;
    this.weights = handles as Eagle3Weights;
    const w = this.weights;
    const gateUp = stackedRows([w.gate.value, w.up.value], 'midlayer.mlp.gate_up.weight');
    const gateUpGrad = stackedRows([w.gate.grad, w.up.grad], 'midlayer.mlp.gate_up.weight.grad');
    this.gateUp = gateUp && gateUpGrad ? { value: gateUp, grad: gateUpGrad } : undefined;
    const qkv = stackedRows([w.q.value, w.k.value, w.v.value], 'midlayer.self_attn.qkv_proj.weight');
    const qkvGrad = stackedRows([w.q.grad, w.k.grad, w.v.grad], 'midlayer.self_attn.qkv_proj.weight.grad');
    this.qkv = qkv && qkvGrad ? { value: qkv, grad: qkvGrad } : undefined;
  }

  /** Release the frozen tensors (the backend owns and releases the trainable ones; a shared embedding is the target's). */
  destroy(): void {
    this.gpu.release(this.t2d, this.used, ...(this.ownsEmbed ? [this.embed] : []));
    this.rope.destroy();
  }
}

/**
 * Fresh weights for a draft trained from scratch, by the Hugging Face convention the draft's
 * PreTrainedModel init follows: every Linear weight ~ N(0, initializerRange²), every RMSNorm weight 1.
 * The embedding is the target's (`embedding`, [V, H]), frozen: copied in as `embed_tokens.weight`,
 * or left out when `embedding` is 'shared' (the draft then borrows the target's GPU table, Eagle3Frozen).
 * The trainable values do not depend on which.
 */
export function initialEagle3Weights(
  config: Eagle3Config,
  embedding: ArrayLike<number> | 'shared',
  rng: Rng,
  initializerRange = 0.02,
): Record<string, Float32Array> {
  if (embedding !== 'shared' && embedding.length !== config.vocabSize * config.hiddenSize) {
    throw new Error(
      `initialEagle3Weights: embedding has ${embedding.length} values, [${config.vocabSize}, ${config.hiddenSize}] needs ${config.vocabSize * config.hiddenSize}`,
    );
  }
  if (!(initializerRange > 0)) throw new Error(`initialEagle3Weights: initializerRange must be positive, got ${initializerRange}`);
  const out: Record<string, Float32Array> = {};
  if (embedding !== 'shared') {
    // By `set`, not Float32Array.from (which collects an iterable into a JS array first: aborts past about 134M values).
    out[EMBED_NAME] = new Float32Array(embedding.length);
    out[EMBED_NAME].set(embedding);
  }
  for (const [name, shape] of eagle3ParameterShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    out[name] = shape.length === 1 ? new Float32Array(n).fill(1) : Float32Array.from({ length: n }, () => rng.normal() * initializerRange);
  }
  return out;
}
