/**
 * Target weights streamed from the checkpoint's files onto the GPU, slice by slice: each tensor is
 * allocated on the GPU (split into row parts when it exceeds one binding), then filled from whole-row
 * slices of at most `sliceBytes` read by byte range (HfCheckpointSource.readRows) and written into
 * whichever parts hold them (Gpu.writeRows). The host holds one slice at a time, never a tensor
 * whole, so a load's host memory is bounded by the slice size (plus the queue's staging, which is
 * drained every `drainBytes`) whatever the model's size. The GPU tensors are bit-identical to
 * uploading the whole arrays (uploadTargetWeights in ./weights.ts): the same conversion runs on
 * each slice, and conversion is elementwise.
 *
 * Precision as in ./weights.ts: 'f32' stores every tensor as f32; 'f16' stores the matrices as f16
 * (rows of an even length) and keeps the norms and biases f32.
 */
import { storageDtype, type WeightPrecision } from '../../formats/hf-checkpoint.ts';
import type { HfCheckpointSource } from '../../formats/hf-checkpoint-source.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import type { TargetModelConfig } from '../../config/hf-config.ts';
import type { GpuLayerWeights, GpuTargetWeights } from './weights.ts';

export interface StreamOptions {
  /** Called after each slice with file bytes read so far and in all. */
  onProgress?(bytesDone: number, bytesTotal: number): void;
  /** Upper bound of one slice on the host, read or converted (default 16 MiB; at least one row). */
  sliceBytes?: number;
  /** Wait for the GPU after this many bytes are queued, so the queue's staging is freed (default 256 MiB). */
  drainBytes?: number;
}

export const DEFAULT_SLICE_BYTES = 16 * 1024 * 1024;
const DEFAULT_DRAIN_BYTES = 256 * 1024 * 1024;

/** Streams one tensor of `source` into a new GPU tensor of `dtype` (f16 bits or f32 values). */
export async function streamTensor(
  gpu: Gpu,
  source: HfCheckpointSource,
  name: string,
  dtype: 'f32' | 'f16',
  progress: { done: number; queued: number },
  options: StreamOptions = {},
): Promise<Tensor> {
  const spec = source.tensors.find((t) => t.name === name);
  if (!spec) throw new Error(`target weights: "${name}" is not a tensor this model loads`);
  const shape = spec.shape;
  const cols = shape.slice(1).reduce((a, d) => a * d, 1);
  if (dtype === 'f16' && cols % 2 !== 0)
    throw new Error(
      `target weights: tensor "${name}" [${shape.join(', ')}] has rows of ${cols} elements; f16 storage needs an even row length`,
    );
  const rows = shape.length === 0 ? 1 : shape[0];
  const fileRowBytes = source.rowBytes(name);
  const rowBytes = Math.max(fileRowBytes, cols * (dtype === 'f16' ? 2 : 4));
  const perSlice = Math.max(1, Math.floor((options.sliceBytes ?? DEFAULT_SLICE_BYTES) / rowBytes));
  const tensor = gpu.tensor(shape, dtype, name);
  try {
    for (let r = 0; r < rows; r += perSlice) {
      const n = Math.min(perSlice, rows - r);
      gpu.writeRows(tensor, r, await source.readRows(name, r, n, dtype));
      progress.done += n * fileRowBytes;
      progress.queued += n * rowBytes;
      options.onProgress?.(progress.done, source.totalBytes);
      if (progress.queued >= (options.drainBytes ?? DEFAULT_DRAIN_BYTES)) {
        await gpu.sync();
        progress.queued = 0;
      }
    }
  } catch (err) {
    gpu.release(tensor);
    throw err;
  }
  return tensor;
}

/** Streams every weight of `source` onto the GPU at `precision` (names the tensor on any error). */
export async function streamTargetWeights(
  gpu: Gpu,
  source: HfCheckpointSource,
  precision: WeightPrecision,
  options: StreamOptions = {},
): Promise<GpuTargetWeights> {
  if (precision !== 'f32' && precision !== 'f16')
    throw new Error(`target weights: weightPrecision must be f32 or f16, got ${JSON.stringify(precision)}`);
  const byName = new Map<string, Tensor>();
  const progress = { done: 0, queued: 0 };
  options.onProgress?.(0, source.totalBytes);
  try {
    for (const t of source.tensors) {
      byName.set(t.name, await streamTensor(gpu, source, t.name, storageDtype(t.name, precision), progress, options));
    }
    await gpu.sync();
  } catch (err) {
    gpu.release(...byName.values());
    throw err;
  }
  return assembleGpuWeights(source.config, byName);
}

/** The streamed tensors by name, in the shape of GpuTargetWeights (a tied lm_head is the embedding). */
function assembleGpuWeights(c: TargetModelConfig, t: ReadonlyMap<string, Tensor>): GpuTargetWeights {
  const get = (name: string): Tensor => {
    const tensor = t.get(name);
    if (!tensor) throw new Error(`target weights: tensor "${name}" was not loaded`);
    return tensor;
  };
  const opt = (name: string, wanted: boolean): Tensor | undefined => (wanted ? get(name) : undefined);
  const layers: GpuLayerWeights[] = [];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    layers.push({
      inputNorm: get(`${p}.input_layernorm.weight`),
      qProj: get(`${p}.self_attn.q_proj.weight`),
      kProj: get(`${p}.self_attn.k_proj.weight`),
      vProj: get(`${p}.self_attn.v_proj.weight`),
      oProj: get(`${p}.self_attn.o_proj.weight`),
      qBias: opt(`${p}.self_attn.q_proj.bias`, c.qkvBias),
      kBias: opt(`${p}.self_attn.k_proj.bias`, c.qkvBias),
      vBias: opt(`${p}.self_attn.v_proj.bias`, c.qkvBias),
      oBias: opt(`${p}.self_attn.o_proj.bias`, c.oBias),
      qNorm: opt(`${p}.self_attn.q_norm.weight`, c.qkNorm),
      kNorm: opt(`${p}.self_attn.k_norm.weight`, c.qkNorm),
      postAttentionNorm: get(`${p}.post_attention_layernorm.weight`),
      gateProj: get(`${p}.mlp.gate_proj.weight`),
      upProj: get(`${p}.mlp.up_proj.weight`),
      downProj: get(`${p}.mlp.down_proj.weight`),
      gateBias: opt(`${p}.mlp.gate_proj.bias`, c.mlpBias),
      upBias: opt(`${p}.mlp.up_proj.bias`, c.mlpBias),
      downBias: opt(`${p}.mlp.down_proj.bias`, c.mlpBias),
    });
  }
  const embedTokens = get('model.embed_tokens.weight');
  return { embedTokens, layers, finalNorm: get('model.norm.weight'), lmHead: c.tieWordEmbeddings ? embedTokens : get('lm_head.weight') };
}
