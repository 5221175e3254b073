/**
 * Loads a Hugging Face model directory (config.json + model.safetensors, or shards listed in
 * model.safetensors.index.json) from a FileStore into float32 weights.
 *
 * Every tensor the config implies is checked for presence, float dtype and shape from the headers
 * alone, before any weight bytes are read, so a wrong or incomplete checkpoint fails in
 * milliseconds with the tensor's name. Weights are then read one tensor at a time (f16/bf16/f64
 * widened or narrowed to f32), reporting progress in bytes.
 *
 * With `weightPrecision: 'f16'` the matrices (embedding, attention and MLP projections, lm_head)
 * are read as IEEE binary16 bits instead (Uint16Array), for f16 storage on the GPU: F16 tensors are
 * their raw bits, BF16 / F32 are converted bits to bits (round to nearest even), and a value beyond
 * the f16 range is refused naming the tensor. No Float32Array of a matrix is ever made. Norm
 * weights and biases (small vectors) stay f32.
 */
import type { FileStore } from '../ports/storage.ts';
import { assertFinite } from '../util/finite.ts';
import { parseHfConfig, type TargetModelConfig } from '../config/hf-config.ts';
import { f16ToF32, SafetensorsReader } from './safetensors.ts';

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

/** An f16-bits matrix widened to f32 (for host consumers that need values, e.g. the draft's embedding). */
export function matrixF32(w: MatrixWeight): Float32Array {
  if (w instanceof Float32Array) return w;
  return Float32Array.from(w, f16ToF32);
}

export interface ExpectedTensor {
  readonly name: string;
  readonly shape: readonly number[];
  /** False only for lm_head.weight under tied embeddings: allowed, checked, but not needed. */
  readonly required: boolean;
}

/** Every tensor name and shape a checkpoint of this config must hold. */
export function expectedTensors(c: TargetModelConfig): ExpectedTensor[] {
  const out: ExpectedTensor[] = [];
  const add = (name: string, shape: number[], required = true): void => void out.push({ name, shape, required });
  const q = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  add('model.embed_tokens.weight', [c.vocabSize, c.hiddenSize]);
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    add(`${p}.input_layernorm.weight`, [c.hiddenSize]);
    add(`${p}.self_attn.q_proj.weight`, [q, c.hiddenSize]);
    add(`${p}.self_attn.k_proj.weight`, [kv, c.hiddenSize]);
    add(`${p}.self_attn.v_proj.weight`, [kv, c.hiddenSize]);
    add(`${p}.self_attn.o_proj.weight`, [c.hiddenSize, q]);
    if (c.qkvBias) {
      add(`${p}.self_attn.q_proj.bias`, [q]);
      add(`${p}.self_attn.k_proj.bias`, [kv]);
      add(`${p}.self_attn.v_proj.bias`, [kv]);
    }
    if (c.oBias) add(`${p}.self_attn.o_proj.bias`, [c.hiddenSize]);
    if (c.qkNorm) {
      add(`${p}.self_attn.q_norm.weight`, [c.headDim]);
      add(`${p}.self_attn.k_norm.weight`, [c.headDim]);
    }
    add(`${p}.post_attention_layernorm.weight`, [c.hiddenSize]);
    add(`${p}.mlp.gate_proj.weight`, [c.intermediateSize, c.hiddenSize]);
    add(`${p}.mlp.up_proj.weight`, [c.intermediateSize, c.hiddenSize]);
    add(`${p}.mlp.down_proj.weight`, [c.hiddenSize, c.intermediateSize]);
    if (c.mlpBias) {
      add(`${p}.mlp.gate_proj.bias`, [c.intermediateSize]);
      add(`${p}.mlp.up_proj.bias`, [c.intermediateSize]);
      add(`${p}.mlp.down_proj.bias`, [c.hiddenSize]);
    }
  }
  add('model.norm.weight', [c.hiddenSize]);
  add('lm_head.weight', [c.vocabSize, c.hiddenSize], !c.tieWordEmbeddings);
  return out;
}

const join = (dir: string, file: string): string => (dir === '' || dir === '.' ? file : `${dir.replace(/\/+$/, '')}/${file}`);
const FLOAT_DTYPES = new Set(['F32', 'F16', 'BF16', 'F64']);

/** Opens every shard's header and maps tensor name → reader. */
async function openShards(store: FileStore, dir: string): Promise<Map<string, SafetensorsReader>> {
  const indexPath = join(dir, 'model.safetensors.index.json');
  const byName = new Map<string, SafetensorsReader>();
  // The single file is asked for first: most small checkpoints have only it, and over HTTP a probe
  // for an absent index is a 404 the browser logs as an error on every load.
  const single = join(dir, 'model.safetensors');
  if (await store.exists(single)) {
    const reader = await SafetensorsReader.open(store, single);
    for (const name of reader.names) byName.set(name, reader);
    return byName;
  }
  if (!(await store.exists(indexPath)))
    throw new Error(`${store.root}/${dir}: neither model.safetensors nor model.safetensors.index.json found`);
  const source = `${store.root}/${indexPath}`;
  let index: unknown;
  try {
    index = JSON.parse(new TextDecoder().decode(await store.read(indexPath)));
  } catch (err) {
    throw new Error(`${source}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  const weightMap = (index as { weight_map?: unknown } | null)?.weight_map;
  if (typeof weightMap !== 'object' || weightMap === null || Array.isArray(weightMap))
    throw new Error(`${source}: missing weight_map object`);
  const shards = new Map<string, SafetensorsReader>();
  for (const [name, file] of Object.entries(weightMap)) {
    if (typeof file !== 'string' || file === '' || file.includes('/'))
      throw new Error(`${source}: tensor "${name}" maps to invalid shard ${JSON.stringify(file)}`);
    let reader = shards.get(file);
    if (!reader) {
      reader = await SafetensorsReader.open(store, join(dir, file));
      shards.set(file, reader);
    }
    if (!reader.has(name)) throw new Error(`${source}: tensor "${name}" is listed in shard ${file}, which does not contain it`);
    byName.set(name, reader);
  }
  return byName;
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
  const configPath = join(dir, 'config.json');
  const config = parseHfConfig(new TextDecoder().decode(await store.read(configPath)), `${store.root}/${configPath}`);
  const byName = await openShards(store, dir);

  // Validate everything from headers before reading any weights.
  const wanted: ExpectedTensor[] = [];
  let total = 0;
  for (const t of expectedTensors(config)) {
    const reader = byName.get(t.name);
    if (!reader) {
      if (t.required)
        throw new Error(`${store.root}/${dir}: checkpoint is missing tensor "${t.name}" (expected shape [${t.shape.join(', ')}])`);
      continue;
    }
    const e = reader.entry(t.name);
    if (e.shape.length !== t.shape.length || e.shape.some((d, i) => d !== t.shape[i])) {
      throw new Error(`${reader.source}: tensor "${t.name}" has shape [${e.shape.join(', ')}], config implies [${t.shape.join(', ')}]`);
    }
    if (!FLOAT_DTYPES.has(e.dtype)) throw new Error(`${reader.source}: tensor "${t.name}" is ${e.dtype}, expected a float dtype`);
    if (!t.required) continue; // tied lm_head: shape checked, embedding used instead
    wanted.push(t);
    total += e.end - e.begin;
  }
  const used = new Set(wanted.map((t) => t.name));
  if (config.tieWordEmbeddings) used.add('lm_head.weight');
  const unused = [...byName.keys()].filter((n) => !used.has(n));

  const tensors = new Map<string, MatrixWeight>();
  let done = 0;
  options.onProgress?.(0, total);
  for (const t of wanted) {
    const reader = byName.get(t.name)!;
    if (precision === 'f16' && isMatrixWeight(t.name)) {
      // Refuses non-finite and out-of-range values itself, naming the tensor.
      tensors.set(t.name, await reader.f16Bits(t.name));
      const e = reader.entry(t.name);
      done += e.end - e.begin;
      options.onProgress?.(done, total);
      continue;
    }
    const values = await reader.f32(t.name);
    // A NaN or Inf weight makes every output garbage while every shape still checks out.
    assertFinite(values, `tensor "${t.name}"`, reader.source);
    tensors.set(t.name, values);
    const e = reader.entry(t.name);
    done += e.end - e.begin;
    options.onProgress?.(done, total);
  }
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
