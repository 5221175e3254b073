/**
 * The tensors of a run's memory plan, by the code that allocates them: the target's weights, one
 * capture forward, a stored sample, a collated batch, the held-out batches, the column blocks of a split
 * weight. ./memory-plan-tensors.ts groups them into the plan's items and costs them.
 */
import type { TargetModelConfig } from '../../config/hf-config.ts';
import { sizeClass } from '../../gpu/buffer-pool.ts';
import { READBACK_SLICE_BYTES } from '../../gpu/gpu.ts';
import { rowChunkRows } from '../../gpu/row-chunks.ts';
import { BYTES_PER_ELEMENT, type DType } from '../../gpu/tensor.ts';

export interface TensorSpec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly dtype: DType;
  /** The kernels that read it take row parts (vocabulary tables); everything else is bound whole. */
  readonly splittable?: boolean;
  /** Identical tensors of this shape (per layer, per TTT step, per stored sample). */
  readonly count: number;
  /** Not a storage binding (the uniform arena, readback buffers): only maxBufferSize bounds it. */
  readonly unbound?: boolean;
}

export const t = (name: string, shape: readonly number[], dtype: DType = 'f32', splittable = false): TensorSpec => ({
  name,
  shape,
  dtype,
  splittable,
  count: 1,
});
/** `n` copies of each spec, costed once and multiplied (a million stored samples stay cheap to plan). */
export const times = (n: number, specs: readonly TensorSpec[]): TensorSpec[] => specs.map((s) => ({ ...s, count: s.count * n }));

export function targetWeightSpecs(c: TargetModelConfig, dtype: DType): TensorSpec[] {
  const H = c.hiddenSize;
  const qw = c.numHeads * c.headDim;
  const kvw = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  // Matrices are stored in `dtype` and may be split into row parts; norms and biases stay f32.
  const m = (name: string, shape: number[]) => t(name, shape, dtype, true);
  const layer = [
    t('input_layernorm', [H]),
    m('q_proj', [qw, H]),
    m('k_proj', [kvw, H]),
    m('v_proj', [kvw, H]),
    m('o_proj', [H, qw]),
    t('post_attention_layernorm', [H]),
    m('gate_proj', [I, H]),
    m('up_proj', [I, H]),
    m('down_proj', [H, I]),
    ...(c.qkvBias ? [t('q_bias', [qw]), t('k_bias', [kvw]), t('v_bias', [kvw])] : []),
    ...(c.oBias ? [t('o_bias', [H])] : []),
    ...(c.qkNorm ? [t('q_norm', [c.headDim]), t('k_norm', [c.headDim])] : []),
    ...(c.mlpBias ? [t('gate_bias', [I]), t('up_bias', [I]), t('down_bias', [H])] : []),
  ];
  return [
    m('model.embed_tokens.weight', [c.vocabSize, H]),
    ...times(c.numLayers, layer),
    t('model.norm.weight', [H]),
    ...(c.tieWordEmbeddings ? [] : [m('lm_head.weight', [c.vocabSize, H])]),
  ];
}

/** What reading `spec` back once costs in staging (Gpu.readOnce): one slice at most, not the tensor. */
export function readbackSpec(spec: TensorSpec, name = spec.name): TensorSpec {
  const elements = spec.shape.reduce((a, b) => a * b, 1);
  const slice = Math.floor(READBACK_SLICE_BYTES / BYTES_PER_ELEMENT[spec.dtype]);
  return { ...spec, name, shape: [Math.min(elements, slice)], splittable: true, unbound: true };
}

/**
 * The tensors of a loop over `rows` in chunks of `chunk` rows: `make(n)` for the full chunk, and for
 * the smaller last chunk those of its tensors whose size class differs from the full chunk's (the pool
 * gives the last chunk the full chunk's buffer when the class is the same; otherwise both are held).
 */
export function chunkSpecs(rows: number, chunk: number, make: (n: number) => TensorSpec[]): TensorSpec[] {
  const full = make(Math.min(chunk, rows));
  const rest = rows % chunk;
  if (chunk >= rows || rest === 0) return full;
  const bytes = (spec: TensorSpec) => sizeClass(Math.max(4, spec.shape.reduce((a, b) => a * b, 1) * BYTES_PER_ELEMENT[spec.dtype]));
  return [...full, ...make(rest).filter((spec, i) => bytes(spec) !== bytes(full[i]))];
}

/** One batched capture forward of `rows` tokens: the layer's working set (released per layer) and what the capture keeps. */
export function captureSpecs(
  c: TargetModelConfig,
  rows: number,
  seq: number,
  aux: number,
  weights: DType,
  maxBinding: number,
  compact = false,
): TensorSpec[] {
  const H = c.hiddenSize;
  const qw = c.numHeads * c.headDim;
  const kvw = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const batch = Math.max(1, Math.floor(rows / seq));
  const wb = BYTES_PER_ELEMENT[weights];
  // Logits are made a binding's worth of rows at a time: full logits a row part of the [rows, V] tensor
  // (a split lm_head's column blocks are that many rows), compact features' statistics a chunk of that many
  // rows each (model/target/head-stats.ts: the last chunk overlaps, so every chunk has the same rows).
  const logitRows = Math.max(1, Math.min(rows, Math.floor(maxBinding / (c.vocabSize * 4))));
  const mlpRows = rowChunkRows(rows, I * 4, maxBinding);
  // The last chunk of a loop over chunks is smaller: its tensors are of other size classes, held beside the full chunk's.
  const blocks = [
    ...columnBlocks('q_proj', [qw, H], rows, maxBinding, wb),
    ...columnBlocks('k_proj', [kvw, H], rows, maxBinding, wb),
    ...columnBlocks('o_proj', [H, qw], rows, maxBinding, wb),
    ...chunkSpecs(rows, mlpRows, (n) => [
      ...columnBlocks('gate_proj', [I, H], n, maxBinding, wb),
      ...columnBlocks('down_proj', [H, I], n, maxBinding, wb),
    ]),
    // Full logits: the row parts of [rows, V] (the last one shorter); compact: chunks of logitRows rows each.
    ...(compact
      ? columnBlocks('lm_head', [c.vocabSize, H], logitRows, maxBinding, wb)
      : chunkSpecs(rows, logitRows, (n) => columnBlocks('lm_head', [c.vocabSize, H], n, maxBinding, wb))),
  ];
  return [
    ...blocks,
    t('ids, positions, mask', [3 * rows], 'i32'),
    t('h', [rows, H]),
    t('invRms', [rows]),
    t('attn.x', [rows, H]),
    t('attn.qRaw', [rows, qw]),
    t('attn.kRaw', [rows, kvw]),
    t('attn.v', [rows, kvw]),
    t('attn.q', [rows, qw]),
    t('attn.k', [rows, kvw]),
    ...(c.qkNorm ? [t('attn.qNormed', [rows, qw]), t('attn.kNormed', [rows, kvw])] : []),
    t('attn.o', [rows, qw]),
    t('attn.lse', [batch, c.numHeads, seq]),
    t('mlp.x', [rows, H]),
    // The MLP runs over row chunks when [rows, I] f32 is over a binding (model/target/layers.ts).
    ...chunkSpecs(rows, mlpRows, (n) => [
      t('mlp.gate', [n, I]),
      t('mlp.up', [n, I]),
      t('mlp.act', [n, I]),
      ...(mlpRows < rows ? [t('mlp.x (rows)', [n, H]), t('mlp.h (rows)', [n, H])] : []),
    ]),
    ...times(aux, [t('hidden_states (aux)', [rows, H])]),
    t('final norm', [rows, H]),
    // Compact features take each row's logsumexp and argmax from logits made a binding's worth of rows
    // at a time (TargetFeatureSource.rowStats); full logits are made whole.
    ...(compact
      ? [
          t('stats.logits', [logitRows, c.vocabSize]),
          t('stats.hidden', [logitRows, H]),
          t('stats.lse, stats.tok', [2 * logitRows]),
          t('target_lse, target_tok', [2 * rows]),
        ]
      : [t('target.logits', [rows, c.vocabSize], 'f32', true)]),
  ];
}

/**
 * One captured sample of `S` tokens as stored (src/inference/target-feature-source.ts). Its float
 * features may be split: the capture's row copies, the casts, the store, its spill, the data plane
 * and the batch's collation all move row ranges across parts.
 */
export function sampleSpecs(S: number, auxWidth: number, target: TargetWidth, feat: DType): TensorSpec[] {
  return [
    t('hidden_state', [S, auxWidth], feat, true),
    t('target', [S, target.width], feat, true),
    t('input_ids', [S], 'i32'),
    t('loss_mask', [S], 'i32'),
    ...(target.compact ? [t('target_lse', [S]), t('target_tok', [S], 'i32')] : []),
  ];
}

/**
 * The width of the `target` feature: the target's vocabulary (full logits) or hidden size (compact
 * features, which also carry a per-position logsumexp and argmax).
 */
export interface TargetWidth {
  readonly width: number;
  readonly compact: boolean;
}

/** The shape of the most bytes among `shapes`. */
export function largestShape(shapes: readonly (readonly number[])[]): readonly number[] {
  const size = (sh: readonly number[]) => sh.reduce((a, d) => a * d, 1);
  return shapes.reduce((a, b) => (size(b) > size(a) ? b : a), [1]);
}

/**
 * The scratch blocks of a linear layer whose weight [N, K] f32 is split into row parts of P rows:
 * its output's column slice of each part goes through a [rows, P] block (and the last part's
 * [rows, N mod P]) copied into place (src/kernels/linear.ts); none when the weight fits one binding.
 */
export function columnBlocks(name: string, shape: readonly number[], rows: number, maxBinding: number, bytes = 4): TensorSpec[] {
  if (shape.length !== 2) return [];
  const [N, K] = shape;
  if (N * K * bytes <= maxBinding) return [];
  const P = Math.max(1, Math.floor(maxBinding / (K * bytes)));
  return [
    t(`${name} column block`, [rows, P], 'f32', true),
    ...(N % P > 0 ? [t(`${name} last column block`, [rows, N % P], 'f32', true)] : []),
  ];
}

/** One collated batch of `b` sequences (src/data/feature-dataloader.ts): its float features may be split. */
export function batchSpecs(b: number, S: number, auxWidth: number, target: TargetWidth, feat: DType): TensorSpec[] {
  return [
    t('input_ids', [b, S], 'i32'),
    t('attention_mask', [b, S], 'i32'),
    t('loss_mask', [b, S], 'i32'),
    t('hidden_state', [b, S, auxWidth], feat, true),
    t('target', [b, S, target.width], feat, true),
    ...(target.compact ? [t('target_lse', [b, S]), t('target_tok', [b, S], 'i32')] : []),
  ];
}

/**
 * f16 full-vocabulary logits widened to f32 right before a step (training/strategies/eagle3.ts), freed
 * once it is encoded. The draft reads f16 hidden states itself, a row chunk at a time
 * (model/eagle3/fc-chunks.ts; the step's moments count the chunks).
 */
export function widenedSpecs(b: number, S: number, target: TargetWidth, feat: DType): TensorSpec[] {
  return feat === 'f16' && !target.compact ? [t('target (widened)', [b, S, target.width], 'f32', true)] : [];
}

/** The periodic evaluation's resident batches: `n` sequences collated `b` at a time, the last batch holding the rest. */
export function heldOutSpecs(n: number, b: number, S: number, auxWidth: number, target: TargetWidth, feat: DType): TensorSpec[] {
  if (n <= 0) return [];
  const full = Math.floor(n / b);
  const rest = n - full * b;
  return [...times(full, batchSpecs(b, S, auxWidth, target, feat)), ...(rest > 0 ? batchSpecs(rest, S, auxWidth, target, feat) : [])];
}
