/**
 * A Hugging Face model directory (config.json + model.safetensors, or the shards listed in
 * model.safetensors.index.json) opened for streaming: `open` reads the config and every shard's
 * header and checks each tensor the config implies (present, float dtype, shape) before any weight
 * byte is read, so a wrong or incomplete checkpoint fails in milliseconds naming the tensor.
 *
 * Weights are then read by `readRows`: a range of whole rows of one tensor, read by byte range from
 * its shard and converted on the way (BF16/F16/F32/F64 → f32 values, or → IEEE binary16 bits for f16
 * storage, rounding to nearest even; a non-finite value, or one beyond the f16 range, is refused
 * naming the tensor). A caller that uploads slice by slice never holds more than one slice of a
 * tensor on the host, which is what keeps an 8B target's load within a few hundred MB of host memory.
 */
import { parseHfConfig, type TargetModelConfig } from '../config/hf-config.ts';
import type { FileStore } from '../ports/storage.ts';
import { READ_BUDGETS } from '../ports/read-budget.ts';
import { assertFinite } from '../util/finite.ts';
import { decodeF16Bits, decodeF32, SAFETENSORS_DTYPE_BYTES, SafetensorsReader, type SafetensorsEntry } from './safetensors.ts';

/** How a slice is delivered: f32 values, or f16 bits (Uint16Array). */
export type RowFormat = 'f32' | 'f16';

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
  const indexBytes = await store.read(indexPath, READ_BUDGETS.config);
  try {
    index = JSON.parse(new TextDecoder().decode(indexBytes));
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

/** Reads the config of a model directory (only config.json: no weights needed). */
export async function readHfConfig(store: FileStore, dir: string): Promise<TargetModelConfig> {
  const configPath = join(dir, 'config.json');
  return parseHfConfig(new TextDecoder().decode(await store.read(configPath, READ_BUDGETS.config)), `${store.root}/${configPath}`);
}

export class HfCheckpointSource {
  private constructor(
    readonly config: TargetModelConfig,
    /** The tensors the model uses, in load order (a tied lm_head is not among them). */
    readonly tensors: readonly ExpectedTensor[],
    /** Tensors in the files that the model does not use (e.g. a stale rotary inv_freq). */
    readonly unused: readonly string[],
    /** File bytes of the used tensors: the `bytesTotal` of a load's progress. */
    readonly totalBytes: number,
    private readonly byName: ReadonlyMap<string, SafetensorsReader>,
  ) {}

  /** Opens and validates `dir` of `store` ('' for its root) from the config and headers alone. */
  static async open(store: FileStore, dir: string): Promise<HfCheckpointSource> {
    const config = await readHfConfig(store, dir);
    const byName = await openShards(store, dir);
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
    return new HfCheckpointSource(config, wanted, unused, total, byName);
  }

  /** The file entry of a used tensor (its dtype and byte range). */
  entry(name: string): SafetensorsEntry {
    const reader = this.byName.get(name);
    if (!reader || !this.tensors.some((t) => t.name === name)) throw new Error(`checkpoint: "${name}" is not a tensor this model loads`);
    return reader.entry(name);
  }

  /** File bytes of one row of `name` (a 1-D tensor's row is one element). */
  rowBytes(name: string): number {
    const e = this.entry(name);
    return e.shape.slice(1).reduce((a, d) => a * d, 1) * SAFETENSORS_DTYPE_BYTES[e.dtype];
  }

  /** Rows [rowStart, rowStart + rowCount) of `name`, converted to `format` and checked finite. */
  async readRows(name: string, rowStart: number, rowCount: number, format: RowFormat): Promise<Float32Array | Uint16Array> {
    const e = this.entry(name);
    const reader = this.byName.get(name)!;
    const rows = e.shape.length === 0 ? 1 : e.shape[0];
    if (!Number.isInteger(rowStart) || !Number.isInteger(rowCount) || rowStart < 0 || rowCount < 0 || rowStart + rowCount > rows)
      throw new Error(`${reader.source}: tensor "${name}" has ${rows} rows; rows [${rowStart}, ${rowStart + rowCount}) were asked for`);
    const rowBytes = this.rowBytes(name);
    const bytes = rowCount * rowBytes;
    const raw = bytes === 0 ? new Uint8Array(0) : await reader.store.readRange(reader.path, e.begin + rowStart * rowBytes, bytes);
    // Error messages name the tensor; a slice's value index is relative to its first row.
    const slice: SafetensorsEntry = rowStart === 0 && rowCount === rows ? e : { ...e, name: `${name} (rows from ${rowStart})` };
    if (format === 'f16') return decodeF16Bits(slice, raw, reader.source);
    const values = decodeF32(slice, raw, reader.source);
    // A NaN or Inf weight makes every output garbage while every shape still checks out.
    assertFinite(values, `tensor "${name}"`, reader.source);
    return values;
  }
}
