/**
 * Target-model weights on the GPU: every array of a loaded `TargetWeights` uploaded once with its
 * PyTorch shape ([out, in] for Linear weights). A vocab-sized table larger than one binding is split
 * into row parts by `gpu.upload`; the embedding kernel and `lmHeadInto` in layers.ts handle parts.
 * Tied embeddings share one tensor.
 *
 * Weight precision 'f32' (the default) uploads every array as f32, as it always has. 'f16' stores
 * the matrices (embedding, q/k/v/o, gate/up/down, lm_head) as f16 tensors — half the bytes of the
 * model — taking f16 bits as loaded (hf-checkpoint with weightPrecision 'f16') or rounding f32
 * arrays here; the kernels read them as packed pairs and compute in f32. Every matrix row must have
 * an even number of elements (a row part must start on a 32-bit word); norms and biases stay f32.
 */
import { matrixF32, type MatrixWeight, type TargetWeights, type WeightPrecision } from '../../formats/hf-checkpoint.ts';
import { f32ToF16Bits } from '../../formats/f16-bits.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import type { TargetModelConfig } from '../../config/hf-config.ts';

/** The GPU twin of `LayerWeights`: optional weights are undefined when the config has none. */
export interface GpuLayerWeights {
  readonly inputNorm: Tensor;
  readonly qProj: Tensor;
  readonly kProj: Tensor;
  readonly vProj: Tensor;
  readonly oProj: Tensor;
  readonly qBias: Tensor | undefined;
  readonly kBias: Tensor | undefined;
  readonly vBias: Tensor | undefined;
  readonly oBias: Tensor | undefined;
  readonly qNorm: Tensor | undefined;
  readonly kNorm: Tensor | undefined;
  readonly postAttentionNorm: Tensor;
  readonly gateProj: Tensor;
  readonly upProj: Tensor;
  readonly downProj: Tensor;
  readonly gateBias: Tensor | undefined;
  readonly upBias: Tensor | undefined;
  readonly downBias: Tensor | undefined;
}

export interface GpuTargetWeights {
  readonly embedTokens: Tensor;
  readonly layers: readonly GpuLayerWeights[];
  readonly finalNorm: Tensor;
  /** The same tensor as `embedTokens` under tied embeddings. */
  readonly lmHead: Tensor;
}

/** Uploads every weight, checking each array's length against the config (names the tensor on error). */
export function uploadTargetWeights(
  gpu: Gpu,
  c: TargetModelConfig,
  w: TargetWeights<MatrixWeight>,
  precision: WeightPrecision = 'f32',
): GpuTargetWeights {
  if (precision !== 'f32' && precision !== 'f16')
    throw new Error(`target weights: weightPrecision must be f32 or f16, got ${JSON.stringify(precision)}`);
  const uploaded: Tensor[] = [];
  const check = (name: string, data: ArrayLike<number> | undefined, shape: number[]): void => {
    if (!data) throw new Error(`target weights: tensor "${name}" is missing (config ${c.architecture} needs shape [${shape.join(', ')}])`);
    const n = shape.reduce((a, d) => a * d, 1);
    if (data.length !== n)
      throw new Error(`target weights: tensor "${name}" has ${data.length} values, shape [${shape.join(', ')}] needs ${n}`);
  };
  const put = (name: string, data: Float32Array | undefined, shape: number[]): Tensor => {
    check(name, data, shape);
    const t = gpu.upload(shape, 'f32', data!, name);
    uploaded.push(t);
    return t;
  };
  const matrix = (name: string, data: MatrixWeight | undefined, shape: number[]): Tensor => {
    if (precision === 'f32') return put(name, data && matrixF32(data), shape);
    check(name, data, shape);
    const cols = shape[shape.length - 1];
    if (cols % 2 !== 0)
      throw new Error(
        `target weights: tensor "${name}" [${shape.join(', ')}] has rows of ${cols} elements; f16 storage needs an even row length`,
      );
    const bits = data instanceof Uint16Array ? data : f32ToF16Bits(data!, `target weights: tensor "${name}"`);
    const t = gpu.upload(shape, 'f16', bits, name);
    uploaded.push(t);
    return t;
  };
  const opt = (name: string, data: Float32Array | undefined, shape: number[], wanted: boolean): Tensor | undefined => {
    if (!wanted) return undefined;
    return put(name, data, shape);
  };
  try {
    const H = c.hiddenSize;
    const qw = c.numHeads * c.headDim;
    const kvw = c.numKvHeads * c.headDim;
    const I = c.intermediateSize;
    if (w.layers.length !== c.numLayers)
      throw new Error(`target weights: ${w.layers.length} layers, config has num_hidden_layers ${c.numLayers}`);
    const embedTokens = matrix('model.embed_tokens.weight', w.embedTokens, [c.vocabSize, H]);
    const layers = w.layers.map((l, i): GpuLayerWeights => {
      const p = `model.layers.${i}`;
      return {
        inputNorm: put(`${p}.input_layernorm.weight`, l.inputNorm, [H]),
        qProj: matrix(`${p}.self_attn.q_proj.weight`, l.qProj, [qw, H]),
        kProj: matrix(`${p}.self_attn.k_proj.weight`, l.kProj, [kvw, H]),
        vProj: matrix(`${p}.self_attn.v_proj.weight`, l.vProj, [kvw, H]),
        oProj: matrix(`${p}.self_attn.o_proj.weight`, l.oProj, [H, qw]),
        qBias: opt(`${p}.self_attn.q_proj.bias`, l.qBias, [qw], c.qkvBias),
        kBias: opt(`${p}.self_attn.k_proj.bias`, l.kBias, [kvw], c.qkvBias),
        vBias: opt(`${p}.self_attn.v_proj.bias`, l.vBias, [kvw], c.qkvBias),
        oBias: opt(`${p}.self_attn.o_proj.bias`, l.oBias, [H], c.oBias),
        qNorm: opt(`${p}.self_attn.q_norm.weight`, l.qNorm, [c.headDim], c.qkNorm),
        kNorm: opt(`${p}.self_attn.k_norm.weight`, l.kNorm, [c.headDim], c.qkNorm),
        postAttentionNorm: put(`${p}.post_attention_layernorm.weight`, l.postAttentionNorm, [H]),
        gateProj: matrix(`${p}.mlp.gate_proj.weight`, l.gateProj, [I, H]),
        upProj: matrix(`${p}.mlp.up_proj.weight`, l.upProj, [I, H]),
        downProj: matrix(`${p}.mlp.down_proj.weight`, l.downProj, [H, I]),
        gateBias: opt(`${p}.mlp.gate_proj.bias`, l.gateBias, [I], c.mlpBias),
        upBias: opt(`${p}.mlp.up_proj.bias`, l.upBias, [I], c.mlpBias),
        downBias: opt(`${p}.mlp.down_proj.bias`, l.downBias, [H], c.mlpBias),
      };
    });
    const finalNorm = put('model.norm.weight', w.finalNorm, [H]);
    const lmHead = c.tieWordEmbeddings ? embedTokens : matrix('lm_head.weight', w.lmHead, [c.vocabSize, H]);
    return { embedTokens, layers, finalNorm, lmHead };
  } catch (err) {
    gpu.release(...uploaded);
    throw err;
  }
}

function allTensors(w: GpuTargetWeights): Set<Tensor> {
  const all = new Set<Tensor>([w.embedTokens, w.finalNorm, w.lmHead]);
  for (const l of w.layers) for (const t of Object.values(l) as (Tensor | undefined)[]) if (t) all.add(t);
  return all;
}

/** Returns every weight buffer to the pool (a tied lm_head is released once). */
export function releaseTargetWeights(gpu: Gpu, w: GpuTargetWeights): void {
  gpu.release(...allTensors(w));
}

/** GPU bytes of the weights as allocated (each part padded to 4 bytes; a tied lm_head once). */
export function targetWeightBytes(w: GpuTargetWeights): number {
  let bytes = 0;
  for (const t of allTensors(w)) for (const p of t.parts) bytes += p.byteLength;
  return bytes;
}
