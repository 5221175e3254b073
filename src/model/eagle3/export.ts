/**
 * EAGLE3 draft export for SGLang and import back (docs/export.md).
 *
 * Export writes a Hugging Face directory SGLang's `llama_eagle3.py` loads:
 *   config.json        LlamaForCausalLMEagle3, model_type llama, draft_vocab_size, vocab_size, the
 *                      sizes, rms eps, RoPE as `rope_theta` + `rope_parameters` with the legacy
 *                      `rope_scaling` mirrored (null for plain RoPE, the only kind the draft trains),
 *                      max_position_embeddings, tie_word_embeddings false, dtype bfloat16
 *   model.safetensors  every trained weight in bf16 (round to nearest even), `d2t` int64 offsets,
 *                      `t2d` bool; never the embedding (SGLang takes it from the target). Keys in
 *                      sorted order with `{"format": "pt"}` metadata, like `save_pretrained`.
 *
 * Import reads such a directory back into host arrays ready for `Eagle3DraftModel`: the config is
 * re-parsed, every key is checked (required keys present, no `draft_model.` prefix left over, no
 * unknown key, dtypes and shapes match the config, t2d/d2t consistent) with errors naming the file
 * and the key, and the frozen embedding comes from the target.
 *
 * Exporting a training checkpoint folder is src/training/checkpoints/checkpoint-export.ts.
 */
import { SafetensorsFile } from '../../formats/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../formats/safetensors-writer.ts';
import type { FileStore } from '../../ports/storage.ts';
import { assertFinite } from '../../util/finite.ts';
import { EMBED_NAME, eagle3ParameterShapes, parseEagle3Config, type Eagle3Config } from '../../config/eagle3-config.ts';
import type { Eagle3Vocab } from './parameters.ts';
import { vllmAuxLayerIds } from './serving-layers.ts';

/** Keys SpecForge's exporter validates before writing (docs/export.md §4). */
export const REQUIRED_EXPORT_KEYS = ['fc.weight', 'norm.weight', 'lm_head.weight', 't2d', 'd2t'] as const;
export const LEFTOVER_PREFIX = 'draft_model.';

/** The config.json SGLang reads for this draft. */
export function eagle3SglangConfig(c: Eagle3Config): Record<string, unknown> {
  const config: Record<string, unknown> = {
    architectures: ['LlamaForCausalLMEagle3'],
    model_type: 'llama',
    attention_bias: false,
    attention_dropout: 0.0,
    hidden_act: 'silu',
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    num_hidden_layers: 1,
    mlp_bias: false,
    rms_norm_eps: c.rmsNormEps,
    max_position_embeddings: c.maxPositionEmbeddings,
    rope_theta: c.ropeTheta,
    rope_parameters: { rope_theta: c.ropeTheta, rope_type: 'default' },
    rope_scaling: null,
    vocab_size: c.vocabSize,
    draft_vocab_size: c.draftVocabSize,
    tie_word_embeddings: false,
    torch_dtype: 'bfloat16',
    dtype: 'bfloat16',
    use_cache: true,
    pad_token_id: null,
    bos_token_id: null,
    eos_token_id: null,
  };
  if (c.targetHiddenSize !== c.hiddenSize) config.target_hidden_size = c.targetHiddenSize;
  return config;
}

/** f32 values → bf16 bytes (little-endian), round to nearest even; NaN → quiet NaN 0x7fc0. */
export function bf16Bytes(values: ArrayLike<number>): Uint8Array {
  const f = Float32Array.from(values);
  const bits = new Uint32Array(f.buffer);
  const out = new Uint16Array(f.length);
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i];
    out[i] = (b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0 ? 0x7fc0 : ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
  }
  return new Uint8Array(out.buffer);
}

export function checkVocab(c: Eagle3Config, vocab: Eagle3Vocab, source: string): void {
  if (vocab.t2d.length !== c.vocabSize) throw new Error(`${source}: t2d has ${vocab.t2d.length} entries, vocab_size is ${c.vocabSize}`);
  if (vocab.d2t.length !== c.draftVocabSize)
    throw new Error(`${source}: d2t has ${vocab.d2t.length} entries, draft_vocab_size is ${c.draftVocabSize}`);
  let marked = 0;
  for (let v = 0; v < vocab.t2d.length; v++) if (vocab.t2d[v]) marked++;
  if (marked !== c.draftVocabSize) throw new Error(`${source}: t2d marks ${marked} tokens, draft_vocab_size is ${c.draftVocabSize}`);
  let previous = -1;
  for (let i = 0; i < vocab.d2t.length; i++) {
    const target = i + vocab.d2t[i];
    if (!Number.isInteger(target) || target <= previous || target >= c.vocabSize || !vocab.t2d[target]) {
      throw new Error(
        `${source}: d2t[${i}] = ${vocab.d2t[i]} maps draft id ${i} to target ${target}, which is not the next token t2d marks (d2t + arange(D) must equal nonzero(t2d))`,
      );
    }
    previous = target;
  }
}

/** The bf16 model.safetensors bytes of a draft (weights by SpecForge name; the embedding, if present, is left out). */
export function eagle3SglangSafetensors(
  c: Eagle3Config,
  weights: Readonly<Record<string, ArrayLike<number>>>,
  vocab: Eagle3Vocab,
): Uint8Array {
  const tensors = eagle3ExportTensors(c, weights, vocab);
  const sorted: Record<string, TensorToWrite> = {};
  for (const name of Object.keys(tensors).sort()) sorted[name] = tensors[name];
  return writeSafetensors(sorted, { format: 'pt' });
}

/**
 * The tensors every export format holds, by SpecForge name: each trained weight in bf16 (finite, of
 * the config's shape), `d2t` int64 and `t2d` bool, after the vocabulary is checked; never the embedding.
 */
export function eagle3ExportTensors(
  c: Eagle3Config,
  weights: Readonly<Record<string, ArrayLike<number>>>,
  vocab: Eagle3Vocab,
): Record<string, TensorToWrite> {
  checkVocab(c, vocab, 'export');
  const tensors: Record<string, TensorToWrite> = {};
  for (const [name, shape] of eagle3ParameterShapes(c)) {
    const w = weights[name];
    if (!w) throw new Error(`export: missing weight ${name}`);
    const n = shape.reduce((a, b) => a * b, 1);
    if (w.length !== n) throw new Error(`export: ${name} has ${w.length} values, shape [${shape.join(', ')}] needs ${n}`);
    // A diverged run must not ship: SGLang would load NaN weights without complaint.
    assertFinite(w, `weight ${name}`, 'export');
    tensors[name] = { dtype: 'BF16', shape, data: bf16Bytes(w) };
  }
  const d2t = BigInt64Array.from(Array.from(vocab.d2t, (x) => BigInt(x)));
  tensors.d2t = { dtype: 'I64', shape: [c.draftVocabSize], data: new Uint8Array(d2t.buffer) };
  tensors.t2d = { dtype: 'BOOL', shape: [c.vocabSize], data: Uint8Array.from(vocab.t2d, (x) => (x ? 1 : 0)) };
  return tensors;
}

export const joinPath = (dir: string, name: string): string => (dir === '' ? name : `${dir.replace(/\/$/, '')}/${name}`);

export interface ExportOptions {
  /**
   * Target layers whose outputs feed the draft, recorded as `eagle_config.eagle_aux_hidden_state_layer_ids`
   * (as SpecForge's configs do, and SGLang reads) and as vLLM names them in a top-level
   * `eagle_aux_hidden_state_layer_ids` (serving-layers.ts). Omit them to leave the serving default
   * [1, N/2 − 1, N − 4] implied.
   */
  readonly auxLayerIds?: readonly number[];
}

/** The config.json of an export: the SGLang config, with the aux layers as SGLang and vLLM each read them. */
export function eagle3ExportConfig(c: Eagle3Config, auxLayerIds?: readonly number[]): Record<string, unknown> {
  const config = eagle3SglangConfig(c);
  if (!auxLayerIds) return config;
  return {
    ...config,
    eagle_aux_hidden_state_layer_ids: vllmAuxLayerIds(auxLayerIds),
    eagle_config: { eagle_aux_hidden_state_layer_ids: [...auxLayerIds] },
  };
}

/** Write `<dir>/model.safetensors` then `<dir>/config.json` (each atomically). */
export async function writeEagle3Export(
  store: FileStore,
  dir: string,
  c: Eagle3Config,
  weights: Readonly<Record<string, ArrayLike<number>>>,
  vocab: Eagle3Vocab,
  options: ExportOptions = {},
): Promise<void> {
  const model = eagle3SglangSafetensors(c, weights, vocab);
  await store.writeAtomic(joinPath(dir, 'model.safetensors'), model);
  const config = eagle3ExportConfig(c, options.auxLayerIds);
  await store.writeAtomic(joinPath(dir, 'config.json'), new TextEncoder().encode(`${JSON.stringify(config, null, 2)}\n`));
}

export interface ImportedEagle3 {
  readonly config: Eagle3Config;
  /** Every trainable weight (f32, widened from bf16) plus `embed_tokens.weight` (unless read with embedding 'none'). */
  readonly values: Record<string, Float32Array>;
  readonly vocab: { t2d: Int32Array; d2t: Int32Array };
  /** Aux layer ids from the config's eagle_config, when it names them. */
  readonly auxLayerIds?: readonly number[];
}

/** An f32 copy by `set`: `Float32Array.from` collects an iterable into a JS array first, which aborts past about 134M values. */
function copyF32(values: ArrayLike<number>): Float32Array {
  const out = new Float32Array(values.length);
  out.set(values);
  return out;
}

/** `eagle_config.eagle_aux_hidden_state_layer_ids` of a parsed draft config.json, when present and integral. */
export function eagleAuxLayerIds(configJson: unknown): number[] | undefined {
  const ids = (configJson as { eagle_config?: { eagle_aux_hidden_state_layer_ids?: unknown } } | null)?.eagle_config
    ?.eagle_aux_hidden_state_layer_ids;
  return Array.isArray(ids) && ids.every((x) => Number.isInteger(x)) ? (ids as number[]) : undefined;
}

const FLOAT_DTYPES = new Set(['BF16', 'F16', 'F32']);

/**
 * Validate and decode an exported directory. `embedding` is the target's `embed_tokens` [V, H]; it
 * may be omitted only when the file itself carries `embed_tokens.weight`. 'none' leaves the
 * embedding out of `values` (a caller whose draft borrows the target's GPU table, Eagle3Frozen).
 */
export async function readEagle3Export(store: FileStore, dir: string, embedding?: ArrayLike<number> | 'none'): Promise<ImportedEagle3> {
  const configPath = joinPath(dir, 'config.json');
  const modelPath = joinPath(dir, 'model.safetensors');
  const configSource = `${store.root}/${configPath}`;
  const modelSource = `${store.root}/${modelPath}`;
  if (!(await store.exists(configPath))) throw new Error(`${configSource}: missing (an SGLang export needs config.json)`);
  if (!(await store.exists(modelPath))) throw new Error(`${modelSource}: missing (an SGLang export needs model.safetensors)`);
  const configText = new TextDecoder().decode(await store.read(configPath));
  const raw = JSON.parse(configText) as Record<string, unknown>;
  const rope = raw.rope_parameters as { rope_type?: string; rope_theta?: number } | undefined | null;
  if (rope && rope.rope_type !== undefined && rope.rope_type !== 'default')
    throw new Error(`${configSource}: rope_parameters.rope_type "${rope.rope_type}" is not supported (plain RoPE only)`);
  if (raw.rope_theta === undefined && rope?.rope_theta !== undefined) raw.rope_theta = rope.rope_theta;
  const config = parseEagle3Config(raw, configSource);

  const file = new SafetensorsFile(await store.read(modelPath), modelSource);
  for (const name of file.names) {
    if (name.startsWith(LEFTOVER_PREFIX))
      throw new Error(`${modelSource}: key "${name}" carries a leftover "${LEFTOVER_PREFIX}" prefix (strip it before export)`);
  }
  const shapes = new Map<string, number[]>(eagle3ParameterShapes(config));
  for (const name of [...REQUIRED_EXPORT_KEYS, ...shapes.keys()]) {
    if (!file.has(name)) throw new Error(`${modelSource}: missing required key "${name}"`);
  }
  for (const name of file.names) {
    if (!shapes.has(name) && name !== 't2d' && name !== 'd2t' && name !== EMBED_NAME)
      throw new Error(`${modelSource}: unexpected key "${name}" (not an EAGLE3 draft weight)`);
  }
  const values: Record<string, Float32Array> = {};
  for (const [name, shape] of shapes) {
    const e = file.entry(name);
    if (!FLOAT_DTYPES.has(e.dtype)) throw new Error(`${modelSource}: key "${name}" is ${e.dtype}, expected a float dtype (BF16)`);
    if (e.shape.join() !== shape.join())
      throw new Error(`${modelSource}: key "${name}" has shape [${e.shape}], the config needs [${shape}]`);
    values[name] = file.f32(name);
    assertFinite(values[name], `weight ${name}`, `import ${modelSource}`);
  }
  const t2dEntry = file.entry('t2d');
  if (t2dEntry.dtype !== 'BOOL' && t2dEntry.dtype !== 'U8')
    throw new Error(`${modelSource}: key "t2d" is ${t2dEntry.dtype}, expected BOOL`);
  const d2tEntry = file.entry('d2t');
  if (d2tEntry.dtype !== 'I64' && d2tEntry.dtype !== 'I32') throw new Error(`${modelSource}: key "d2t" is ${d2tEntry.dtype}, expected I64`);
  if (t2dEntry.shape.join() !== `${config.vocabSize}`)
    throw new Error(`${modelSource}: key "t2d" has shape [${t2dEntry.shape}], the config needs [${config.vocabSize}]`);
  if (d2tEntry.shape.join() !== `${config.draftVocabSize}`)
    throw new Error(`${modelSource}: key "d2t" has shape [${d2tEntry.shape}], the config needs [${config.draftVocabSize}]`);
  const vocab = { t2d: file.i32('t2d'), d2t: file.i32('d2t') };
  checkVocab(config, vocab, modelSource);

  const embedShape = [config.vocabSize, config.hiddenSize];
  if (embedding === 'none') {
    // The trainable weights only.
  } else if (embedding) {
    if (embedding.length !== config.vocabSize * config.hiddenSize)
      throw new Error(
        `import ${modelSource}: the target embedding has ${embedding.length} values, [${embedShape}] needs ${config.vocabSize * config.hiddenSize}`,
      );
    values[EMBED_NAME] = copyF32(embedding);
  } else if (file.has(EMBED_NAME)) {
    if (file.shape(EMBED_NAME).join() !== embedShape.join())
      throw new Error(`${modelSource}: key "${EMBED_NAME}" has shape [${file.shape(EMBED_NAME)}], the config needs [${embedShape}]`);
    values[EMBED_NAME] = file.f32(EMBED_NAME);
  } else {
    throw new Error(`import ${modelSource}: no embedding (exports never carry ${EMBED_NAME}); pass the target model's embed_tokens`);
  }
  return { config, values, vocab, auxLayerIds: eagleAuxLayerIds(raw) };
}
