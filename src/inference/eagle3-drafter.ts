/**
 * EAGLE3 draft inference with a KV cache: the serving-time form of the TTT unroll (docs/eagle3.md
 * §10) for chain drafting, one sequence at a time.
 *
 * Training row t at TTT step k sees the step-0 keys of rows 0..t and its own chain at steps 1..k, with
 * RoPE at t + k. Laid out by position that is an ordinary causal KV cache:
 *   position u < n      the "step-0" entry of row u: hidden fc(aux[u]) (the target's aux states at u),
 *                       token x[u + 1], RoPE u — written once the target has verified position u;
 *   position n − 1 + j  draft step j ≥ 1 from the last verified row n − 1: hidden = the previous step's
 *                       raw output h_out, token = the previous draft token, RoPE n − 1 + j.
 * So `rows(h_in, tokens, start)` — one decoder pass over m rows at positions start.., each attending
 * to cache rows 0..its own position — serves both: catching up on newly verified positions (h_in =
 * fc(aux), a batch of rows) and each later draft step (one row). Rolling back is only bookkeeping:
 * speculative entries past the verified prefix are overwritten by the next catch-up.
 *
 * Draft ids map to target ids with d2t (target = draft + d2t[draft]); embeddings are the target's.
 */
import type { FileStore } from '../ports/storage.ts';
import { READ_BUDGETS } from '../ports/read-budget.ts';
import { SafetensorsReader } from '../formats/safetensors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { extendAttentionForward } from '../kernels/attention-extend.ts';
import { copyStrided } from '../kernels/copy-strided.ts';
import { embeddingForward } from '../kernels/embedding.ts';
import { linearForward } from '../kernels/linear.ts';
import { rmsnormForward } from '../kernels/rmsnorm.ts';
import { ropeTableForward } from '../kernels/rope-table.ts';
import { swigluForward } from '../kernels/swiglu.ts';
import { eagle3ParameterShapes, parseEagle3Config, type Eagle3Config } from '../config/eagle3-config.ts';
import { eagleAuxLayerIds } from '../model/eagle3/export.ts';
import { Eagle3Rope } from '../model/eagle3/rope.ts';
import { argmax } from '../model/target/sampling.ts';

/** A draft as loaded from disk: config, trainable weights by SpecForge name, vocabulary mapping. */
export interface Eagle3DraftCheckpoint {
  readonly config: Eagle3Config;
  /** Every name of eagle3ParameterShapes (no embedding: the target's is used). */
  readonly weights: Readonly<Record<string, Float32Array>>;
  /** [D] offsets: target id = draft id + d2t[draft id]. */
  readonly d2t: Int32Array;
  /** Aux layer ids from the config's eagle_config, when it names them. */
  readonly auxLayerIds?: readonly number[];
}

/**
 * Reads an SGLang-format draft directory: config.json + model.safetensors with fc.weight,
 * midlayer.*, norm.weight, lm_head.weight, d2t (and t2d, unused here), floats in bf16/f16/f32.
 * `prefix` selects keys stored under a prefix (e.g. `param.` in the reference fixture), and
 * `configPath` overrides where the config is read from (relative to the store).
 */
export async function loadEagle3Draft(
  store: FileStore,
  dir: string,
  options: { weightsFile?: string; configPath?: string; prefix?: string } = {},
): Promise<Eagle3DraftCheckpoint> {
  const join = (name: string) => (dir ? `${dir}/${name}` : name);
  const configPath = options.configPath ?? join('config.json');
  const configText = new TextDecoder().decode(await store.read(configPath, READ_BUDGETS.config));
  const config = parseEagle3Config(configText, `${store.root}/${configPath}`);
  const reader = await SafetensorsReader.open(store, join(options.weightsFile ?? 'model.safetensors'));
  const prefix = options.prefix ?? '';
  const weights: Record<string, Float32Array> = {};
  for (const [name, shape] of eagle3ParameterShapes(config)) {
    const key = prefix + name;
    if (!reader.has(key))
      throw new Error(
        `${reader.source}: missing draft tensor "${key}" (an SGLang EAGLE3 export has fc.weight, midlayer.*, norm.weight, lm_head.weight, d2t, t2d)`,
      );
    const got = reader.entry(key).shape;
    if (got.length !== shape.length || got.some((d, i) => d !== shape[i]))
      throw new Error(`${reader.source}: "${key}" has shape [${got.join(', ')}], the config needs [${shape.join(', ')}]`);
    weights[name] = await reader.f32(key);
  }
  let d2t: Int32Array;
  if (reader.has(prefix + 'd2t')) d2t = await reader.i32(prefix + 'd2t');
  else if (reader.has('d2t')) d2t = await reader.i32('d2t');
  else if (config.draftVocabSize === config.vocabSize) d2t = new Int32Array(config.draftVocabSize);
  else
    throw new Error(
      `${reader.source}: no d2t tensor, and draft_vocab_size ${config.draftVocabSize} != vocab_size ${config.vocabSize} needs one`,
    );
  if (d2t.length !== config.draftVocabSize)
    throw new Error(`${reader.source}: d2t has ${d2t.length} entries, draft_vocab_size is ${config.draftVocabSize}`);
  for (let i = 0; i < d2t.length; i++) {
    const t = i + d2t[i];
    if (t < 0 || t >= config.vocabSize)
      throw new Error(`${reader.source}: d2t maps draft id ${i} to target id ${t}, outside [0, ${config.vocabSize})`);
  }
  return { config, weights, d2t, auxLayerIds: eagleAuxLayerIds(JSON.parse(configText)) };
}

interface DraftGpuWeights {
  fc: Tensor;
  hiddenNorm: Tensor;
  inputNorm: Tensor;
  q: Tensor;
  k: Tensor;
  v: Tensor;
  o: Tensor;
  postNorm: Tensor;
  gate: Tensor;
  up: Tensor;
  down: Tensor;
  norm: Tensor;
  lmHead: Tensor;
}

const NAMES: Readonly<Record<keyof DraftGpuWeights, string>> = {
  fc: 'fc.weight',
  hiddenNorm: 'midlayer.hidden_norm.weight',
  inputNorm: 'midlayer.input_layernorm.weight',
  q: 'midlayer.self_attn.q_proj.weight',
  k: 'midlayer.self_attn.k_proj.weight',
  v: 'midlayer.self_attn.v_proj.weight',
  o: 'midlayer.self_attn.o_proj.weight',
  postNorm: 'midlayer.post_attention_layernorm.weight',
  gate: 'midlayer.mlp.gate_proj.weight',
  up: 'midlayer.mlp.up_proj.weight',
  down: 'midlayer.mlp.down_proj.weight',
  norm: 'norm.weight',
  lmHead: 'lm_head.weight',
};

/** Output of one `rows` pass: raw hidden outputs [m, H] and draft logits [m, D] (caller releases). */
export interface DraftRowsOutput {
  hOut: Tensor;
  logits: Tensor;
}

export class Eagle3Drafter {
  private readonly w: DraftGpuWeights;
  private readonly rope: Eagle3Rope;
  private kCache?: Tensor;
  private vCache?: Tensor;
  private capacity = 0;

  /**
   * `embed` is the target's embedding table [V, H] (borrowed, not released here).
   */
  constructor(
    readonly gpu: Gpu,
    readonly checkpoint: Eagle3DraftCheckpoint,
    private readonly embed: Tensor,
  ) {
    const c = checkpoint.config;
    if (embed.numel !== c.vocabSize * c.hiddenSize)
      throw new Error(
        `Eagle3Drafter: the embedding ${embed.label} has ${embed.numel} values, the draft needs [${c.vocabSize}, ${c.hiddenSize}]`,
      );
    const shapes = new Map(eagle3ParameterShapes(c));
    const w: Partial<DraftGpuWeights> = {};
    for (const [handle, name] of Object.entries(NAMES) as [keyof DraftGpuWeights, string][]) {
      const values = checkpoint.weights[name];
      const shape = shapes.get(name)!;
      if (!values) throw new Error(`Eagle3Drafter: missing weight ${name}`);
      if (values.length !== shape.reduce((a, b) => a * b, 1))
        throw new Error(
          `Eagle3Drafter: ${name} has ${values.length} values, shape [${shape.join(', ')}] needs ${shape.reduce((a, b) => a * b, 1)}`,
        );
      w[handle] = gpu.upload(shape, 'f32', values, `draft.${name}`);
    }
    this.w = w as DraftGpuWeights;
    this.rope = new Eagle3Rope(gpu, c);
  }

  get config(): Eagle3Config {
    return this.checkpoint.config;
  }

  /** Target id of draft id `d`. */
  toTarget(d: number): number {
    return d + this.checkpoint.d2t[d];
  }

  /** Greedy target token of each row of draft logits [m, D] read back to the host. */
  greedyTargetIds(logits: Float32Array): number[] {
    const D = this.config.draftVocabSize;
    const out: number[] = [];
    for (let r = 0; r * D < logits.length; r++) out.push(this.toTarget(argmax(logits.subarray(r * D, (r + 1) * D))));
    return out;
  }

  /** Makes sure the KV cache holds positions 0..maxLen−1 (contents are kept only when no growth is needed). */
  reserve(maxLen: number): void {
    if (maxLen <= this.capacity && this.kCache && this.vCache) return;
    this.releaseCache();
    const c = this.config;
    this.kCache = this.gpu.tensor([1, maxLen, c.numKvHeads, c.headDim], 'f32', 'draft.kCache');
    this.vCache = this.gpu.tensor([1, maxLen, c.numKvHeads, c.headDim], 'f32', 'draft.vCache');
    this.capacity = maxLen;
  }

  /** fc(aux) [m, H] for aux [m, 3·Ht]. */
  async fc(aux: Tensor, m: number): Promise<Tensor> {
    const c = this.config;
    if (aux.numel !== m * 3 * c.targetHiddenSize)
      throw new Error(
        `Eagle3Drafter.fc: aux ${aux.label} has ${aux.numel} values, [${m}, ${3 * c.targetHiddenSize}] needs ${m * 3 * c.targetHiddenSize}`,
      );
    const h = this.gpu.tensor([m, c.hiddenSize], 'f32', 'draft.fc');
    await linearForward(this.gpu, aux, this.w.fc, h, { rows: m, inFeatures: 3 * c.targetHiddenSize, outFeatures: c.hiddenSize });
    return h;
  }

  /**
   * One decoder pass over m rows at positions start..start+m−1: row i takes hidden hIn[i] and the
   * embedding of target token tokens[i], writes its key/value at its position and attends to cache
   * rows 0..start+i. Returns the raw outputs and the draft logits.
   */
  async rows(hIn: Tensor, tokens: readonly number[], start: number): Promise<DraftRowsOutput> {
    const c = this.config;
    const gpu = this.gpu;
    const m = tokens.length;
    const H = c.hiddenSize;
    const I = c.intermediateSize;
    const qDim = c.numHeads * c.headDim;
    const kvDim = c.numKvHeads * c.headDim;
    const eps = c.rmsNormEps;
    if (m < 1) throw new Error('Eagle3Drafter.rows: no rows');
    if (hIn.numel !== m * H) throw new Error(`Eagle3Drafter.rows: hIn ${hIn.label} has ${hIn.numel} values, [${m}, ${H}] needs ${m * H}`);
    if (!this.kCache || !this.vCache || start + m > this.capacity)
      throw new Error(
        `Eagle3Drafter.rows: positions ${start}..${start + m - 1} exceed the reserved cache (${this.capacity}); call reserve first`,
      );
    for (const [i, id] of tokens.entries()) {
      if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize)
        throw new Error(`Eagle3Drafter.rows: token ${id} at row ${i} outside [0, ${c.vocabSize})`);
    }
    // Weights may be split into row parts (a real draft's lm_head, fc and MLP exceed a binding): kernels/linear.ts.
    const linear = (x: Tensor, weight: Tensor, y: Tensor, outDim: number, inDim: number, beta = 0) =>
      linearForward(gpu, x, weight, y, { rows: m, inFeatures: inDim, outFeatures: outDim }, { beta });
    const norm = async (x: Tensor, weight: Tensor, y: Tensor) => {
      const inv = gpu.tensor([m], 'f32', 'draft.invRms');
      try {
        await rmsnormForward(gpu, x, weight, y, inv, { rows: m, hidden: H, eps });
      } finally {
        gpu.release(inv);
      }
    };
    const temps: Tensor[] = [];
    const tmp = (shape: number[], label: string, dtype: 'f32' | 'i32' = 'f32') => {
      const t = gpu.tensor(shape, dtype, label);
      temps.push(t);
      return t;
    };
    const ids = gpu.upload([m], 'i32', tokens, 'draft.ids');
    const positions = gpu.upload(
      [m],
      'i32',
      Int32Array.from({ length: m }, (_, i) => start + i),
      'draft.positions',
    );
    temps.push(ids, positions);
    const hOut = gpu.tensor([m, H], 'f32', 'draft.hOut');
    const logits = gpu.tensor([m, c.draftVocabSize], 'f32', 'draft.logits');
    try {
      // z = [input_layernorm(embed(token)) | hidden_norm(h_in)], embedding half first.
      const emb = tmp([m, H], 'draft.emb');
      await embeddingForward(gpu, ids, this.embed, emb, { n: m, vocab: c.vocabSize, hidden: H });
      const embNorm = tmp([m, H], 'draft.embNorm');
      const hidNorm = tmp([m, H], 'draft.hiddenNorm');
      await norm(emb, this.w.inputNorm, embNorm);
      await norm(hIn, this.w.hiddenNorm, hidNorm);
      const z = tmp([m, 2 * H], 'draft.z');
      await copyStrided(gpu, embNorm, z, { rows: m, width: H, dstStride: 2 * H });
      await copyStrided(gpu, hidNorm, z, { rows: m, width: H, dstStride: 2 * H, dstOffset: H });

      const table = this.rope.tables(start + m).forward;
      const q = tmp([m, qDim], 'draft.q');
      const qRot = tmp([m, qDim], 'draft.qRot');
      const k = tmp([m, kvDim], 'draft.k');
      const kRot = tmp([m, kvDim], 'draft.kRot');
      const v = tmp([m, kvDim], 'draft.v');
      await linear(z, this.w.q, q, qDim, 2 * H);
      await linear(z, this.w.k, k, kvDim, 2 * H);
      await linear(z, this.w.v, v, kvDim, 2 * H);
      await ropeTableForward(gpu, q, positions, table, qRot, { rows: m, nHeads: c.numHeads, headDim: c.headDim });
      await ropeTableForward(gpu, k, positions, table, kRot, { rows: m, nHeads: c.numKvHeads, headDim: c.headDim });
      const bytes = m * kvDim * 4;
      gpu.batcher.copyBuffer(
        kRot.part.buffer,
        kRot.part.byteOffset,
        this.kCache.part.buffer,
        this.kCache.part.byteOffset + start * kvDim * 4,
        bytes,
      );
      gpu.batcher.copyBuffer(
        v.part.buffer,
        v.part.byteOffset,
        this.vCache.part.buffer,
        this.vCache.part.byteOffset + start * kvDim * 4,
        bytes,
      );
      const o = tmp([m, qDim], 'draft.o');
      await extendAttentionForward(
        gpu,
        { q: qRot, kCache: this.kCache, vCache: this.vCache, o },
        {
          rows: m,
          start,
          heads: c.numHeads,
          kvHeads: c.numKvHeads,
          headDim: c.headDim,
          maxLen: this.capacity,
        },
      );

      // h1 = h_in + o·Woᵀ;  h_out = h1 + down(silu(gate(n)) ⊙ up(n)), n = post_attention_layernorm(h1).
      const h1 = gpu.clone(hIn, 'draft.h1');
      temps.push(h1);
      await linear(o, this.w.o, h1, H, qDim, 1);
      const n = tmp([m, H], 'draft.n');
      await norm(h1, this.w.postNorm, n);
      const gate = tmp([m, I], 'draft.gate');
      const up = tmp([m, I], 'draft.up');
      const act = tmp([m, I], 'draft.act');
      await linear(n, this.w.gate, gate, I, H);
      await linear(n, this.w.up, up, I, H);
      await swigluForward(gpu, gate, up, act, { rows: m, inter: I });
      gpu.copyInto(h1, hOut);
      await linear(act, this.w.down, hOut, H, I, 1);

      const f = tmp([m, H], 'draft.f');
      await norm(hOut, this.w.norm, f);
      await linear(f, this.w.lmHead, logits, c.draftVocabSize, H);
      return { hOut, logits };
    } catch (err) {
      gpu.release(hOut, logits);
      throw err;
    } finally {
      gpu.release(...temps);
    }
  }

  private releaseCache(): void {
    if (this.kCache) this.gpu.release(this.kCache);
    if (this.vCache) this.gpu.release(this.vCache);
    this.kCache = undefined;
    this.vCache = undefined;
    this.capacity = 0;
  }

  destroy(): void {
    this.releaseCache();
    this.gpu.release(...Object.values(this.w));
    this.rope.destroy();
  }
}
