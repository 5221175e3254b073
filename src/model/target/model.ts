/* eslint-disable max-lines -- longer than 400 lines: one class, because prefill, extend and decode share the layer loop, the weights and the KV cache. */
/**
 * The target model (Llama / Qwen2 / Qwen3 decoders) on the GPU, assembled from the kernels:
 *
 *   h₀ = embed[ids]
 *   per layer:  x = RMSNorm(h) → q, k, v = x·Wᵀ (+ bias) → [Qwen3: per-head RMSNorm on q, k] → RoPE
 *               → causal GQA attention over unpadded keys → h += o·W_oᵀ (+ bias)
 *               x = RMSNorm(h) → h += down(silu(gate(x)) ⊙ up(x))
 *   logits = RMSNorm(h)·lm_headᵀ
 *
 * Three entry points share the layer code:
 *   forward  — batched prefill of right-padded rows with an attention mask, optionally returning any
 *              HF hidden state (the capture path) and the logits at every position;
 *   prefill  — the same over prompts of different lengths, also filling a KvCache, returning the
 *              logits at each prompt's last token;
 *   decode   — one new token per sequence against its cache (attention/decode kernel).
 * Positions are 0..len−1 in every row, as HF uses without explicit position_ids; the mask only hides
 * keys. RoPE reads a host-built (cos, sin) table (kernels/rope-table.ts), so every RoPE scaling the
 * config parser accepts (default, linear, llama3) is supported and rounds like HF's float32. Activations are [rows, width] row-major with rows = batch·seq (or batch when decoding).
 * Every method encodes work into the batcher; tensors it returns belong to the caller (release them).
 * Weight precision (`TargetModelOptions.weightPrecision`): 'f32', or 'f16' storage of the matrices
 * (weights.ts) with unchanged f32 activations and arithmetic — the matmul and embedding kernels
 * take the f16 weight tensors directly (and single-row products take matmul's gemv).
 */
import type { MatrixWeight, TargetCheckpoint, WeightPrecision } from '../../formats/hf-checkpoint.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { fmtShape, Tensor } from '../../gpu/tensor.ts';
import { attentionForward } from '../../kernels/attention.ts';
import { decodeAttentionForward } from '../../kernels/attention-decode.ts';
import { extendAttentionForward } from '../../kernels/attention-extend.ts';
import { copyStrided } from '../../kernels/copy-strided.ts';
import { embeddingForward } from '../../kernels/embedding.ts';
import { matmul } from '../../kernels/matmul.ts';
import { rmsnormForward } from '../../kernels/rmsnorm.ts';
import { buildRopeTable, ropeTableForward } from '../../kernels/rope-table.ts';
import { swigluForward } from '../../kernels/swiglu.ts';
import type { TargetModelConfig } from '../../config/hf-config.ts';
import { releaseTargetWeights, targetWeightBytes, uploadTargetWeights, type GpuLayerWeights, type GpuTargetWeights } from './weights.ts';

export interface TargetModelOptions {
  /**
   * 'f16' stores the matrices as f16 on the GPU (half the bytes; f32 arithmetic). Default: 'f16'
   * when the checkpoint was loaded with f16 bits (hf-checkpoint weightPrecision 'f16'), else 'f32'.
   */
  readonly weightPrecision?: WeightPrecision;
}

export interface TargetForwardInput {
  /** Token ids, row-major [batch, seqLen]. */
  readonly inputIds: ArrayLike<number>;
  readonly batch: number;
  readonly seqLen: number;
  /** 1 = real token, 0 = padding, [batch, seqLen]; all ones when omitted. */
  readonly attentionMask?: ArrayLike<number>;
}

export interface TargetForwardOptions {
  /**
   * HF `hidden_states` indices to return: 0 = embeddings, i = output of decoder layer i − 1,
   * numLayers = the final-normed output. Default none.
   */
  readonly hiddenStates?: readonly number[] | 'all';
  /** Also return the last decoder layer's output before the final norm. */
  readonly lastLayerPrenorm?: boolean;
  /** Compute logits at every position (default true). */
  readonly logits?: boolean;
}

export interface TargetForwardOutput {
  /** Requested hidden states by HF index, each [batch·seqLen, hidden]. */
  readonly hiddenStates: ReadonlyMap<number, Tensor>;
  readonly lastLayerPrenorm?: Tensor;
  /** [batch·seqLen, vocab]. */
  readonly logits?: Tensor;
}

/** Per-layer key/value caches for `batch` sequences of up to `maxLen` tokens. */
export class KvCache {
  /** Tokens held per sequence; the next token of sequence b goes to position lengths[b]. */
  readonly lengths: number[];
  constructor(
    readonly batch: number,
    readonly maxLen: number,
    /** Per layer, [batch, maxLen, kvHeads, headDim] (RoPE applied to keys). */
    readonly keys: readonly Tensor[],
    readonly values: readonly Tensor[],
  ) {
    this.lengths = new Array<number>(batch).fill(0);
  }

  release(gpu: Gpu): void {
    gpu.release(...this.keys, ...this.values);
  }
}

/** Row geometry of one prefill pass, with its position and mask tensors already on the GPU. */
interface PrefillRows {
  readonly batch: number;
  readonly seq: number;
  /** i32 [batch·seq]: t for row (b, t). */
  readonly positions: Tensor;
  /** i32 [batch, seq]. */
  readonly mask: Tensor;
}

export class TargetModel {
  private ones?: Tensor;
  /** RoPE (cos, sin) table for positions 0..ropeRows−1 (kernels/rope-table.ts), grown on demand. */
  private rope?: Tensor;
  private ropeRows = 0;

  private constructor(
    readonly gpu: Gpu,
    readonly config: TargetModelConfig,
    readonly weights: GpuTargetWeights,
    readonly weightPrecision: WeightPrecision,
  ) {}

  /** Uploads a loaded checkpoint's weights (f32 values or f16 bits) at the requested precision. */
  static create(
    gpu: Gpu,
    checkpoint: Pick<TargetCheckpoint<MatrixWeight>, 'config' | 'weights'>,
    options: TargetModelOptions = {},
  ): TargetModel {
    const c = checkpoint.config;
    const precision = options.weightPrecision ?? (checkpoint.weights.embedTokens instanceof Uint16Array ? 'f16' : 'f32');
    return new TargetModel(gpu, c, uploadTargetWeights(gpu, c, checkpoint.weights, precision), precision);
  }

  /** Bytes the weights occupy on the GPU (a tied lm_head counted once). */
  get weightBytes(): number {
    return targetWeightBytes(this.weights);
  }

  destroy(): void {
    releaseTargetWeights(this.gpu, this.weights);
    if (this.ones) this.gpu.release(this.ones);
    if (this.rope) this.gpu.release(this.rope);
    this.ones = undefined;
    this.rope = undefined;
  }

  // ---------------------------------------------------------------------------------------------
  // Public entry points

  /** Batched forward over right-padded rows (the capture path). */
  async forward(input: TargetForwardInput, options: TargetForwardOptions = {}): Promise<TargetForwardOutput> {
    const c = this.config;
    const { batch, seqLen } = input;
    checkPositive('forward: batch', batch);
    checkPositive('forward: seqLen', seqLen);
    if (input.inputIds.length !== batch * seqLen)
      throw new Error(
        `TargetModel.forward: inputIds has ${input.inputIds.length} ids, batch ${batch} × seqLen ${seqLen} needs ${batch * seqLen}`,
      );
    if (input.attentionMask && input.attentionMask.length !== batch * seqLen) {
      throw new Error(
        `TargetModel.forward: attentionMask has ${input.attentionMask.length} values, batch ${batch} × seqLen ${seqLen} needs ${batch * seqLen}`,
      );
    }
    const wanted = new Set(options.hiddenStates === 'all' ? range(c.numLayers + 1) : (options.hiddenStates ?? []));
    for (const i of wanted) {
      if (!Number.isInteger(i) || i < 0 || i > c.numLayers)
        throw new Error(`TargetModel.forward: hidden state index ${i} outside 0..${c.numLayers}`);
    }
    const rows = batch * seqLen;
    const gpu = this.gpu;
    const prefill = this.uploadRows(batch, seqLen, input.attentionMask);
    const h = await this.embed(input.inputIds, rows, 'target.h');
    const hidden = new Map<number, Tensor>();
    const keep = (index: number): void => {
      if (wanted.has(index)) hidden.set(index, gpu.clone(h, `target.hidden_states.${index}`));
    };
    try {
      keep(0);
      for (let l = 0; l < c.numLayers; l++) {
        await this.prefillLayer(l, h, prefill);
        if (l + 1 < c.numLayers) keep(l + 1);
      }
      const lastLayerPrenorm = options.lastLayerPrenorm ? gpu.clone(h, 'target.last_layer_prenorm') : undefined;
      const normed = gpu.tensor([rows, c.hiddenSize], 'f32', `target.hidden_states.${c.numLayers}`);
      await this.rmsnorm(h, this.weights.finalNorm, normed, rows, c.hiddenSize);
      let logits: Tensor | undefined;
      if (options.logits ?? true) {
        logits = gpu.tensor([rows, c.vocabSize], 'f32', 'target.logits');
        await this.lmHeadInto(normed, logits, rows);
      }
      if (wanted.has(c.numLayers)) hidden.set(c.numLayers, normed);
      else gpu.release(normed);
      return { hiddenStates: hidden, lastLayerPrenorm, logits };
    } catch (err) {
      gpu.release(...hidden.values());
      throw err;
    } finally {
      gpu.release(h, prefill.positions, prefill.mask);
    }
  }

  /**
   * One decoder layer over a right-padded batch, in place: h [batch·seqLen, hidden] goes from the
   * layer's input to its output. For tests of the layer in isolation.
   */
  async forwardLayer(layer: number, h: Tensor, input: Omit<TargetForwardInput, 'inputIds'>): Promise<void> {
    if (!Number.isInteger(layer) || layer < 0 || layer >= this.config.numLayers)
      throw new Error(`TargetModel.forwardLayer: layer ${layer} outside 0..${this.config.numLayers - 1}`);
    const rows = input.batch * input.seqLen;
    if (h.numel !== rows * this.config.hiddenSize)
      throw new Error(
        `TargetModel.forwardLayer: h (${h.label}) has ${h.numel} elements, [${rows}, ${this.config.hiddenSize}] needs ${rows * this.config.hiddenSize}`,
      );
    const prefill = this.uploadRows(input.batch, input.seqLen, input.attentionMask);
    try {
      await this.prefillLayer(layer, h, prefill);
    } finally {
      this.gpu.release(prefill.positions, prefill.mask);
    }
  }

  /** An empty cache for `batch` sequences of at most `maxLen` tokens (prompt + generated). */
  createKvCache(batch: number, maxLen: number): KvCache {
    checkPositive('createKvCache: batch', batch);
    checkPositive('createKvCache: maxLen', maxLen);
    const c = this.config;
    const shape = [batch, maxLen, c.numKvHeads, c.headDim];
    const keys: Tensor[] = [];
    const values: Tensor[] = [];
    for (let l = 0; l < c.numLayers; l++) {
      keys.push(this.gpu.tensor(shape, 'f32', `kv.${l}.k`));
      values.push(this.gpu.tensor(shape, 'f32', `kv.${l}.v`));
    }
    return new KvCache(batch, maxLen, keys, values);
  }

  /**
   * Runs the prompts (one per cache sequence, any lengths ≥ 1) through the model, storing their keys
   * and values in `cache` (which must be empty), and returns the logits at each prompt's last token,
   * [batch, vocab].
   */
  async prefill(cache: KvCache, prompts: readonly (readonly number[])[]): Promise<Tensor> {
    const c = this.config;
    const gpu = this.gpu;
    if (prompts.length !== cache.batch)
      throw new Error(`TargetModel.prefill: ${prompts.length} prompts for a cache of batch ${cache.batch}`);
    if (cache.lengths.some((n) => n !== 0))
      throw new Error('TargetModel.prefill: the cache is not empty (create a new one per generation)');
    const lengths = prompts.map((p) => p.length);
    const seq = Math.max(...lengths);
    lengths.forEach((n, b) => {
      if (n < 1) throw new Error(`TargetModel.prefill: prompt ${b} is empty`);
    });
    if (seq > cache.maxLen) throw new Error(`TargetModel.prefill: prompt of ${seq} tokens exceeds the cache capacity ${cache.maxLen}`);
    const batch = cache.batch;
    const rows = batch * seq;
    const ids = new Int32Array(rows);
    const mask = new Int32Array(rows);
    prompts.forEach((p, b) => {
      ids.set(p, b * seq);
      mask.fill(1, b * seq, b * seq + p.length);
    });
    const rowsInfo = this.uploadRows(batch, seq, mask);
    const h = await this.embed(ids, rows, 'prefill.h');
    const last = gpu.tensor([batch, c.hiddenSize], 'f32', 'prefill.last');
    try {
      for (let l = 0; l < c.numLayers; l++) await this.prefillLayer(l, h, rowsInfo, cache);
      // The hidden state at each prompt's last token.
      const rowBytes = c.hiddenSize * 4;
      lengths.forEach((n, b) =>
        gpu.batcher.copyBuffer(
          h.part.buffer,
          h.part.byteOffset + (b * seq + n - 1) * rowBytes,
          last.part.buffer,
          last.part.byteOffset + b * rowBytes,
          rowBytes,
        ),
      );
      const logits = await this.finalLogits(last, batch);
      lengths.forEach((n, b) => (cache.lengths[b] = n));
      return logits;
    } finally {
      gpu.release(h, last, rowsInfo.positions, rowsInfo.mask);
    }
  }

  /**
   * Appends one token per sequence (tokens[b] at position cache.lengths[b]) and returns the logits
   * there, [batch, vocab].
   */
  async decode(cache: KvCache, tokens: readonly number[]): Promise<Tensor> {
    const c = this.config;
    const gpu = this.gpu;
    const batch = cache.batch;
    if (tokens.length !== batch) throw new Error(`TargetModel.decode: ${tokens.length} tokens for a cache of batch ${batch}`);
    cache.lengths.forEach((n, b) => {
      if (n < 1) throw new Error(`TargetModel.decode: sequence ${b} has no prefill (cache length 0)`);
      if (n >= cache.maxLen) throw new Error(`TargetModel.decode: sequence ${b} is full (cache capacity ${cache.maxLen})`);
    });
    this.ensureRope(Math.max(...cache.lengths) + 1);
    const positions = gpu.upload([batch], 'i32', cache.lengths, 'decode.positions');
    const visible = gpu.upload(
      [batch],
      'i32',
      cache.lengths.map((n) => n + 1),
      'decode.lengths',
    );
    const h = await this.embed(tokens, batch, 'decode.h');
    try {
      for (let l = 0; l < c.numLayers; l++) await this.decodeLayer(l, h, cache, positions, visible);
      const logits = await this.finalLogits(h, batch);
      for (let b = 0; b < batch; b++) cache.lengths[b]++;
      return logits;
    } finally {
      gpu.release(h, positions, visible);
    }
  }

  /**
   * Appends `tokens` to the single sequence of `cache` (batch 1) in ONE forward: row i sits at
   * position cache.lengths[0] + i and attends causally to the cache plus rows 0..i. Returns the logits
   * at every new position [m, vocab] and the requested HF hidden states [m, hidden] (indices as in
   * `forward`). This is the speculative-decoding verification pass (and, on an empty cache, a prefill
   * that also returns hidden states). Rolling back is setting cache.lengths[0] lower: later rows are
   * simply overwritten by the next extension.
   */
  async extend(
    cache: KvCache,
    tokens: readonly number[],
    options: { hiddenStates?: readonly number[] } = {},
  ): Promise<{ logits: Tensor; hiddenStates: Map<number, Tensor> }> {
    const c = this.config;
    const gpu = this.gpu;
    if (cache.batch !== 1) throw new Error(`TargetModel.extend: needs a cache of batch 1, got batch ${cache.batch}`);
    const m = tokens.length;
    if (m < 1) throw new Error('TargetModel.extend: no tokens to append');
    const start = cache.lengths[0];
    if (start + m > cache.maxLen)
      throw new Error(`TargetModel.extend: ${start} cached + ${m} new tokens exceed the cache capacity ${cache.maxLen}`);
    const wanted = new Set(options.hiddenStates ?? []);
    for (const i of wanted) {
      if (!Number.isInteger(i) || i < 0 || i > c.numLayers)
        throw new Error(`TargetModel.extend: hidden state index ${i} outside 0..${c.numLayers}`);
    }
    this.ensureRope(start + m);
    // An empty cache takes the causal prefill kernel; otherwise one decode dispatch per new row.
    const rows = start === 0 ? this.uploadRows(1, m) : undefined;
    const positions = rows
      ? rows.positions
      : gpu.upload(
          [m],
          'i32',
          Int32Array.from({ length: m }, (_, i) => start + i),
          'extend.positions',
        );
    const h = await this.embed(tokens, m, 'extend.h');
    const hidden = new Map<number, Tensor>();
    const keep = (index: number): void => {
      if (wanted.has(index)) hidden.set(index, gpu.clone(h, `target.hidden_states.${index}`));
    };
    try {
      keep(0);
      for (let l = 0; l < c.numLayers; l++) {
        if (rows) await this.prefillLayer(l, h, rows, cache);
        else await this.extendLayer(l, h, cache, positions, start, m);
        if (l + 1 < c.numLayers) keep(l + 1);
      }
      const normed = gpu.tensor([m, c.hiddenSize], 'f32', `target.hidden_states.${c.numLayers}`);
      await this.rmsnorm(h, this.weights.finalNorm, normed, m, c.hiddenSize);
      const logits = gpu.tensor([m, c.vocabSize], 'f32', 'target.logits');
      await this.lmHeadInto(normed, logits, m);
      if (wanted.has(c.numLayers)) hidden.set(c.numLayers, normed);
      else gpu.release(normed);
      cache.lengths[0] = start + m;
      return { logits, hiddenStates: hidden };
    } catch (err) {
      gpu.release(...hidden.values());
      throw err;
    } finally {
      gpu.release(h, positions);
      if (rows) gpu.release(rows.mask);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Layers

  /** One layer over m new rows of a batch-1 cache holding `start` tokens (extend attention). */
  private async extendLayer(l: number, h: Tensor, cache: KvCache, positions: Tensor, start: number, m: number): Promise<void> {
    const c = this.config;
    const gpu = this.gpu;
    const w = this.weights.layers[l];
    const kvBytes = c.numKvHeads * c.headDim * 4;
    const { q, k, v, temps } = await this.attentionInputs(w, h, m, positions);
    const o = gpu.tensor([m, c.numHeads * c.headDim], 'f32', 'extend.o');
    try {
      const kc = cache.keys[l].part;
      const vc = cache.values[l].part;
      gpu.batcher.copyBuffer(k.part.buffer, k.part.byteOffset, kc.buffer, kc.byteOffset + start * kvBytes, m * kvBytes);
      gpu.batcher.copyBuffer(v.part.buffer, v.part.byteOffset, vc.buffer, vc.byteOffset + start * kvBytes, m * kvBytes);
      const dims = { rows: m, start, heads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim, maxLen: cache.maxLen };
      await extendAttentionForward(gpu, { q, kCache: cache.keys[l], vCache: cache.values[l], o }, dims);
      await this.attentionOutputAndMlp(w, o, h, m);
    } finally {
      gpu.release(q, k, v, o, ...temps);
    }
  }

  private async prefillLayer(l: number, h: Tensor, p: PrefillRows, cache?: KvCache): Promise<void> {
    const c = this.config;
    const gpu = this.gpu;
    const w = this.weights.layers[l];
    const rows = p.batch * p.seq;
    const kvw = c.numKvHeads * c.headDim;
    const { q, k, v, temps } = await this.attentionInputs(w, h, rows, p.positions);
    const o = gpu.tensor([rows, c.numHeads * c.headDim], 'f32', 'attn.o');
    const lse = gpu.tensor([p.batch, c.numHeads, p.seq], 'f32', 'attn.lse');
    try {
      const dims = { batch: p.batch, seq: p.seq, heads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim };
      await attentionForward(gpu, { q, k, v, mask: p.mask, o, lse }, dims);
      if (cache) {
        // [batch, seq] rows into [batch, maxLen] rows.
        const args = { rows: p.batch, width: p.seq * kvw, srcStride: p.seq * kvw, dstStride: cache.maxLen * kvw };
        await copyStrided(gpu, k, cache.keys[l], args);
        await copyStrided(gpu, v, cache.values[l], args);
      }
      await this.attentionOutputAndMlp(w, o, h, rows);
    } finally {
      gpu.release(q, k, v, o, lse, ...temps);
    }
  }

  private async decodeLayer(l: number, h: Tensor, cache: KvCache, positions: Tensor, visible: Tensor): Promise<void> {
    const c = this.config;
    const gpu = this.gpu;
    const w = this.weights.layers[l];
    const batch = cache.batch;
    const kvBytes = c.numKvHeads * c.headDim * 4;
    const { q, k, v, temps } = await this.attentionInputs(w, h, batch, positions);
    const o = gpu.tensor([batch, c.numHeads * c.headDim], 'f32', 'decode.o');
    try {
      const kc = cache.keys[l].part;
      const vc = cache.values[l].part;
      for (let b = 0; b < batch; b++) {
        const dst = (b * cache.maxLen + cache.lengths[b]) * kvBytes;
        gpu.batcher.copyBuffer(k.part.buffer, k.part.byteOffset + b * kvBytes, kc.buffer, kc.byteOffset + dst, kvBytes);
        gpu.batcher.copyBuffer(v.part.buffer, v.part.byteOffset + b * kvBytes, vc.buffer, vc.byteOffset + dst, kvBytes);
      }
      const dims = { batch, heads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim, maxLen: cache.maxLen };
      await decodeAttentionForward(gpu, { q, kCache: cache.keys[l], vCache: cache.values[l], lengths: visible, o }, dims);
      await this.attentionOutputAndMlp(w, o, h, batch);
    } finally {
      gpu.release(q, k, v, o, ...temps);
    }
  }

  /** RMSNorm, q/k/v projections (+ bias), Qwen3 q/k norms, RoPE. Returns rotated q, k and v. */
  private async attentionInputs(
    w: GpuLayerWeights,
    h: Tensor,
    rows: number,
    positions: Tensor,
  ): Promise<{ q: Tensor; k: Tensor; v: Tensor; temps: Tensor[] }> {
    const c = this.config;
    const gpu = this.gpu;
    const H = c.hiddenSize;
    const qw = c.numHeads * c.headDim;
    const kvw = c.numKvHeads * c.headDim;
    const x = gpu.tensor([rows, H], 'f32', 'attn.x');
    const qRaw = gpu.tensor([rows, qw], 'f32', 'attn.qRaw');
    const kRaw = gpu.tensor([rows, kvw], 'f32', 'attn.kRaw');
    const v = gpu.tensor([rows, kvw], 'f32', 'attn.v');
    const q = gpu.tensor([rows, qw], 'f32', 'attn.q');
    const k = gpu.tensor([rows, kvw], 'f32', 'attn.k');
    const temps = [x];
    try {
      await this.rmsnorm(h, w.inputNorm, x, rows, H);
      await this.linear(x, w.qProj, w.qBias, qRaw, rows, H, qw);
      await this.linear(x, w.kProj, w.kBias, kRaw, rows, H, kvw);
      await this.linear(x, w.vProj, w.vBias, v, rows, H, kvw);
      let qIn = qRaw;
      let kIn = kRaw;
      if (w.qNorm && w.kNorm) {
        // Per-head RMSNorm over head_dim before RoPE (Qwen3): rows of headDim values.
        qIn = gpu.tensor([rows, qw], 'f32', 'attn.qNormed');
        kIn = gpu.tensor([rows, kvw], 'f32', 'attn.kNormed');
        temps.push(qIn, kIn);
        await this.rmsnorm(qRaw, w.qNorm, qIn, rows * c.numHeads, c.headDim);
        await this.rmsnorm(kRaw, w.kNorm, kIn, rows * c.numKvHeads, c.headDim);
      }
      const table = this.rope;
      if (!table) throw new Error('TargetModel: RoPE table missing (ensureRope must run before a layer)');
      await ropeTableForward(gpu, qIn, positions, table, q, { rows, nHeads: c.numHeads, headDim: c.headDim });
      await ropeTableForward(gpu, kIn, positions, table, k, { rows, nHeads: c.numKvHeads, headDim: c.headDim });
      temps.push(qRaw, kRaw);
      return { q, k, v, temps };
    } catch (err) {
      gpu.release(qRaw, kRaw, v, q, k, ...temps);
      throw err;
    }
  }

  /** h += o·W_oᵀ (+ bias); then h += down(silu(gate(x)) ⊙ up(x)) with x = RMSNorm(h). */
  private async attentionOutputAndMlp(w: GpuLayerWeights, o: Tensor, h: Tensor, rows: number): Promise<void> {
    const c = this.config;
    const gpu = this.gpu;
    const H = c.hiddenSize;
    const I = c.intermediateSize;
    await this.linear(o, w.oProj, w.oBias, h, rows, c.numHeads * c.headDim, H, true);
    const x = gpu.tensor([rows, H], 'f32', 'mlp.x');
    const gate = gpu.tensor([rows, I], 'f32', 'mlp.gate');
    const up = gpu.tensor([rows, I], 'f32', 'mlp.up');
    const act = gpu.tensor([rows, I], 'f32', 'mlp.act');
    try {
      await this.rmsnorm(h, w.postAttentionNorm, x, rows, H);
      await this.linear(x, w.gateProj, w.gateBias, gate, rows, H, I);
      await this.linear(x, w.upProj, w.upBias, up, rows, H, I);
      await swigluForward(gpu, gate, up, act, { rows, inter: I });
      await this.linear(act, w.downProj, w.downBias, h, rows, I, H, true);
    } finally {
      gpu.release(x, gate, up, act);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Building blocks

  /** out (+)= x·Wᵀ (+ bias), x [rows, inDim], W [outDim, inDim]. */
  private async linear(
    x: Tensor,
    w: Tensor,
    bias: Tensor | undefined,
    out: Tensor,
    rows: number,
    inDim: number,
    outDim: number,
    accumulate = false,
  ): Promise<void> {
    await matmul(this.gpu, x, w, out, { M: rows, N: outDim, K: inDim }, { transB: true, beta: accumulate ? 1 : 0 });
    // Bias as the K = 1 product ones[rows, 1] · bias[1, outDim], accumulated.
    if (bias) await matmul(this.gpu, this.onesColumn(rows), bias, out, { M: rows, N: outDim, K: 1 }, { beta: 1 });
  }

  /** Makes sure the RoPE table covers positions 0..positions−1. */
  private ensureRope(positions: number): void {
    if (this.rope && this.ropeRows >= positions) return;
    const rows = Math.max(positions, 2 * this.ropeRows, 256);
    if (this.rope) this.gpu.release(this.rope);
    this.rope = this.gpu.upload([rows, this.config.headDim / 2, 2], 'f32', buildRopeTable(this.config, rows), 'target.ropeTable');
    this.ropeRows = rows;
  }

  private onesColumn(rows: number): Tensor {
    if (!this.ones || this.ones.numel < rows) {
      if (this.ones) this.gpu.release(this.ones);
      const n = Math.max(rows, 2 * (this.ones?.numel ?? 0), 64);
      this.ones = this.gpu.upload([n, 1], 'f32', new Float32Array(n).fill(1), 'target.ones');
    }
    return this.ones;
  }

  private async rmsnorm(x: Tensor, w: Tensor, y: Tensor, rows: number, hidden: number): Promise<void> {
    const invRms = this.gpu.tensor([rows], 'f32', 'rmsnorm.invRms');
    try {
      await rmsnormForward(this.gpu, x, w, y, invRms, { rows, hidden, eps: this.config.rmsNormEps });
    } finally {
      this.gpu.release(invRms);
    }
  }

  private async embed(ids: ArrayLike<number>, rows: number, label: string): Promise<Tensor> {
    const c = this.config;
    for (let i = 0; i < rows; i++) {
      const id = ids[i];
      if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize)
        throw new Error(`TargetModel: token id ${id} at index ${i} outside the vocabulary [0, ${c.vocabSize})`);
    }
    const idTensor = this.gpu.upload([rows], 'i32', ids, `${label}.ids`);
    const h = this.gpu.tensor([rows, c.hiddenSize], 'f32', label);
    try {
      await embeddingForward(this.gpu, idTensor, this.weights.embedTokens, h, { n: rows, vocab: c.vocabSize, hidden: c.hiddenSize });
    } catch (err) {
      this.gpu.release(h);
      throw err;
    } finally {
      this.gpu.release(idTensor);
    }
    return h;
  }

  /** logits [rows, vocab] = RMSNorm(h)·lm_headᵀ for h [rows, hidden]. */
  private async finalLogits(h: Tensor, rows: number): Promise<Tensor> {
    const c = this.config;
    const normed = this.gpu.tensor([rows, c.hiddenSize], 'f32', 'final.normed');
    const logits = this.gpu.tensor([rows, c.vocabSize], 'f32', 'target.logits');
    try {
      await this.rmsnorm(h, this.weights.finalNorm, normed, rows, c.hiddenSize);
      await this.lmHeadInto(normed, logits, rows);
      return logits;
    } catch (err) {
      this.gpu.release(logits);
      throw err;
    } finally {
      this.gpu.release(normed);
    }
  }

  /**
   * The target head alone: logits = x·lm_headᵀ for x = the final-normed hidden state (HF
   * hidden_states[N], what offline shards store), shape [..., H] → [..., V]. The same projection
   * `forward` ends with, so offline training sees the logits online capture would have produced.
   */
  async headLogits(x: Tensor): Promise<Tensor> {
    const { hiddenSize: H, vocabSize: V } = this.config;
    if (x.dtype !== 'f32' || x.shape.length < 1 || x.shape[x.shape.length - 1] !== H) {
      throw new Error(
        `TargetModel.headLogits: ${x.label} must be f32 [..., ${H}] (the target's hidden size), got ${x.dtype}${fmtShape(x.shape)}`,
      );
    }
    const logits = this.gpu.tensor([...x.shape.slice(0, -1), V], 'f32', 'target.head_logits');
    try {
      await this.lmHeadInto(x, logits, x.numel / H);
      return logits;
    } catch (err) {
      this.gpu.release(logits);
      throw err;
    }
  }

  /** logits = x·lm_headᵀ; a lm_head split into row parts writes each vocab slice through a scratch tensor. */
  private async lmHeadInto(x: Tensor, logits: Tensor, rows: number): Promise<void> {
    const { hiddenSize: H, vocabSize: V } = this.config;
    const head = this.weights.lmHead;
    if (!head.isChunked) {
      await matmul(this.gpu, x, head, logits, { M: rows, N: V, K: H }, { transB: true });
      return;
    }
    for (const part of head.parts) {
      const slice = new Tensor([part.rowCount, H], head.dtype, [{ ...part, rowStart: 0 }], `${head.label}[${part.rowStart}:]`);
      const scratch = this.gpu.tensor([rows, part.rowCount], 'f32', 'lm_head.slice');
      try {
        await matmul(this.gpu, x, slice, scratch, { M: rows, N: part.rowCount, K: H }, { transB: true });
        await copyStrided(this.gpu, scratch, logits, { rows, width: part.rowCount, dstStride: V, dstOffset: part.rowStart });
      } finally {
        this.gpu.release(scratch);
      }
    }
  }

  private uploadRows(batch: number, seq: number, attentionMask?: ArrayLike<number>): PrefillRows {
    checkPositive('batch', batch);
    checkPositive('seqLen', seq);
    const positions = new Int32Array(batch * seq);
    for (let b = 0; b < batch; b++) for (let t = 0; t < seq; t++) positions[b * seq + t] = t;
    this.ensureRope(seq);
    const mask = attentionMask ? Int32Array.from(attentionMask, (m) => (m ? 1 : 0)) : new Int32Array(batch * seq).fill(1);
    if (mask.length !== batch * seq)
      throw new Error(`TargetModel: attention mask has ${mask.length} values, batch ${batch} × seqLen ${seq} needs ${batch * seq}`);
    return {
      batch,
      seq,
      positions: this.gpu.upload([batch * seq], 'i32', positions, 'target.positions'),
      mask: this.gpu.upload([batch, seq], 'i32', mask, 'target.mask'),
    };
  }
}

function checkPositive(what: string, v: number): void {
  if (!Number.isInteger(v) || v < 1) throw new Error(`TargetModel ${what} must be a positive integer, got ${v}`);
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
