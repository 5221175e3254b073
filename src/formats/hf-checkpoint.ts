/**
 * Loads a Hugging Face model directory whole into host arrays, for host consumers that need every
 * value at once (the CPU reference, tests, small lab targets). Run paths never do this: they stream
 * each tensor slice by slice onto the GPU (./hf-checkpoint-source.ts, src/model/target/weight-stream.ts),
 * so host memory stays bounded by one slice whatever the model's size.
 *
 * The directory is validated from its config and headers first (HfCheckpointSource.open), then
 * read one tensor at a time, reporting progress in bytes. With `weightPrecision: 'f16'` the
 * matrices (embedding, attention and MLP projections, lm_head) are read as IEEE binary16 bits
 * (Uint16Array) for f16 storage on the GPU: F16 tensors are their raw bits, BF16 / F32 are
 * converted bits to bits (round to nearest even), and a value beyond the f16 range is refused
 * naming the tensor. Norm weights and biases (small vectors) stay f32.
 */
import type { FileStore } from '../ports/storage.ts';
import type { TargetModelConfig } from '../config/hf-config.ts';
import { HfCheckpointSource } from './hf-checkpoint-source.ts';
import { f16ToF32 } from './safetensors.ts';

/** How the target's matrices are held: f32 values, or f16 bits for f16 storage on the GPU. */
export type WeightPrecision = 'f32' | 'f16';
export const WEIGHT_PRECISIONS: readonly WeightPrecision[] = ['f32', 'f16'];

/** A weight matrix on the host: f32 values, or IEEE binary16 bits (Uint16Array) under f16 precision. */
export type MatrixWeight = Float32Array | Uint16Array;

/** `W` is the host type of the matrices; vectors (norms, biases) are always f32. */
export interface LayerWeights<W extends MatrixWeight = Float32Array> {
  readonly inputNorm: Float32Array;
  readonly qProj: W;
  readonly kProj: W;
  readonly vProj: W;
  readonly oProj: W;
  readonly qBias?: Float32Array;
  readonly kBias?: Float32Array;
  readonly vBias?: Float32Array;
  readonly oBias?: Float32Array;
  readonly qNorm?: Float32Array;
  readonly kNorm?: Float32Array;
  readonly postAttentionNorm: Float32Array;
  readonly gateProj: W;
  readonly upProj: W;
  readonly downProj: W;
  readonly gateBias?: Float32Array;
  readonly upBias?: Float32Array;
  readonly downBias?: Float32Array;
}

/** Row-major like PyTorch: a Linear weight is [out, in]. */
export interface TargetWeights<W extends MatrixWeight = Float32Array> {
  readonly embedTokens: W;
  readonly layers: readonly LayerWeights<W>[];
  readonly finalNorm: Float32Array;
  /** The same array as `embedTokens` when the config ties them. */
  readonly lmHead: W;
}

export interface TargetCheckpoint<W extends MatrixWeight = Float32Array> {
  readonly config: TargetModelConfig;
  readonly weights: TargetWeights<W>;
  /** Tensors in the files that the model does not use (e.g. a stale rotary inv_freq). */
  readonly unused: readonly string[];
}

export interface LoadOptions {
  onProgress?(bytesDone: number, bytesTotal: number): void;
  /** 'f16' reads the matrices as f16 bits (see the file comment). Default 'f32'. */
  weightPrecision?: WeightPrecision;
}

/** Whether `name` is one of the matrices f16 precision stores as f16 (the rest are vectors). */
export function isMatrixWeight(name: string): boolean {
  return name === 'model.embed_tokens.weight' || name === 'lm_head.weight' || /\.(self_attn|mlp)\.[a-z]+_proj\.weight$/.test(name);
}

/** How a target stores tensor `name` at `precision`: matrices in f16 under 'f16', everything else (norms, biases) f32. */
export function storageDtype(name: string, precision: WeightPrecision): 'f32' | 'f16' {
  return precision === 'f16' && isMatrixWeight(name) ? 'f16' : 'f32';
}

/** An f16-bits matrix widened to f32 (for host consumers that need values). */
export function matrixF32(w: MatrixWeight): Float32Array {
  if (w instanceof Float32Array) return w;
  // An index loop, not Float32Array.from(w, f): `from` collects an iterable into a JS array first,
  // which aborts past about 134M values (a real vocabulary's embedding).
  const out = new Float32Array(w.length);
  for (let i = 0; i < w.length; i++) out[i] = f16ToF32(w[i]);
  return out;
}

/** Loads and validates an HF checkpoint directory (`dir` relative to the store; '' for its root). */
export async function loadHfCheckpoint(
  store: FileStore,
  dir: string,
  options?: LoadOptions & { weightPrecision?: 'f32' },
): Promise<TargetCheckpoint>;
export async function loadHfCheckpoint(
  store: FileStore,
  dir: string,
  options: LoadOptions & { weightPrecision: 'f16' },
): Promise<TargetCheckpoint<Uint16Array>>;
export async function loadHfCheckpoint(store: FileStore, dir: string, options: LoadOptions): Promise<TargetCheckpoint<MatrixWeight>>;
export async function loadHfCheckpoint(store: FileStore, dir: string, options: LoadOptions = {}): Promise<TargetCheckpoint<MatrixWeight>> {
  const precision = options.weightPrecision ?? 'f32';
  if (!WEIGHT_PRECISIONS.includes(precision))
    throw new Error(`loadHfCheckpoint: weightPrecision must be one of ${WEIGHT_PRECISIONS.join(', ')}, got ${JSON.stringify(precision)}`);
  const source = await HfCheckpointSource.open(store, dir);
  const config = source.config;
  const tensors = new Map<string, MatrixWeight>();
  let done = 0;
  options.onProgress?.(0, source.totalBytes);
  for (const t of source.tensors) {
    const format = storageDtype(t.name, precision);
    tensors.set(t.name, await source.readRows(t.name, 0, t.shape.length === 0 ? 1 : t.shape[0], format));
    const e = source.entry(t.name);
    done += e.end - e.begin;
    options.onProgress?.(done, source.totalBytes);
  }
  const unused = source.unused;
  return { config, weights: assemble(config, tensors), unused };
}

function assemble(c: TargetModelConfig, t: Map<string, MatrixWeight>): TargetWeights<MatrixWeight> {
  const get = (name: string): MatrixWeight => t.get(name)!;
  const vec = (name: string): Float32Array => t.get(name) as Float32Array;
  const opt = (name: string): Float32Array | undefined => t.get(name) as Float32Array | undefined;
  const layers: LayerWeights<MatrixWeight>[] = [];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    layers.push({
      inputNorm: vec(`${p}.input_layernorm.weight`),
      qProj: get(`${p}.self_attn.q_proj.weight`),
      kProj: get(`${p}.self_attn.k_proj.weight`),
      vProj: get(`${p}.self_attn.v_proj.weight`),
      oProj: get(`${p}.self_attn.o_proj.weight`),
      qBias: opt(`${p}.self_attn.q_proj.bias`),
      kBias: opt(`${p}.self_attn.k_proj.bias`),
      vBias: opt(`${p}.self_attn.v_proj.bias`),
      oBias: opt(`${p}.self_attn.o_proj.bias`),
      qNorm: opt(`${p}.self_attn.q_norm.weight`),
      kNorm: opt(`${p}.self_attn.k_norm.weight`),
      postAttentionNorm: vec(`${p}.post_attention_layernorm.weight`),
      gateProj: get(`${p}.mlp.gate_proj.weight`),
      upProj: get(`${p}.mlp.up_proj.weight`),
      downProj: get(`${p}.mlp.down_proj.weight`),
      gateBias: opt(`${p}.mlp.gate_proj.bias`),
      upBias: opt(`${p}.mlp.up_proj.bias`),
      downBias: opt(`${p}.mlp.down_proj.bias`),
    });
  }
  const embedTokens = get('model.embed_tokens.weight');
  return { embedTokens, layers, finalNorm: vec('model.norm.weight'), lmHead: c.tieWordEmbeddings ? embedTokens : get('lm_head.weight') };
}
