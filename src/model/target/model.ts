/**
 * The target model (Llama / Qwen2 / Qwen3 decoders) on the GPU, assembled from the kernels:
 *
 *   h₀ = embed[ids]
 *   per layer:  x = RMSNorm(h) → q, k, v = x·Wᵀ (+ bias) → [Qwen3: per-head RMSNorm on q, k] → RoPE
 *               → causal GQA attention over unpadded keys → h += o·W_oᵀ (+ bias)
 *               x = RMSNorm(h) → h += down(silu(gate(x)) ⊙ up(x))
 *   logits = RMSNorm(h)·lm_headᵀ
 *
 * Four entry points share the layer code:
 *   forward  — batched prefill of right-padded rows with an attention mask, optionally returning any
 *              HF hidden state (the capture path) and the logits at every position;
 *   prefill  — the same over prompts of different lengths, also filling a KvCache, returning the
 *              logits at each prompt's last token;
 *   decode   — one new token per sequence against its cache (attention/decode kernel);
 *   extend   — several new tokens of one cached sequence in one forward (speculative verification).
 * Positions are 0..len−1 in every row, as HF uses without explicit position_ids; the mask only hides
 * keys. RoPE reads a host-built (cos, sin) table (kernels/rope-table.ts), so every RoPE scaling the
 * config parser accepts (default, linear, llama3) is supported and rounds like HF's float32.
 * Activations are [rows, width] row-major with rows = batch·seq (or batch when decoding).
 * Every method encodes work into the batcher; tensors it returns belong to the caller (release them).
 * Weight precision (`TargetModelOptions.weightPrecision`): 'f32', or 'f16' storage of the matrices
 * (weights.ts) with unchanged f32 activations and arithmetic — the matmul and embedding kernels
 * take the f16 weight tensors directly (and single-row products take matmul's gemv).
 *
 * This file is the entry points: their argument checks, the hidden states they return and the
 * cache lengths they keep. The kernels of a pass and its row layout are layers.ts, the weights on
 * the GPU weights.ts (streamed from the files by weight-stream.ts), the cache kv-cache.ts.
 */
import type { MatrixWeight, TargetCheckpoint, WeightPrecision } from '../../formats/hf-checkpoint.ts';
import type { HfCheckpointSource } from '../../formats/hf-checkpoint-source.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { fmtShape, type Tensor } from '../../gpu/tensor.ts';
import { copyRows } from '../../gpu/tensor-views.ts';
import type { TargetModelConfig } from '../../config/hf-config.ts';
import { DraftHead } from './draft-head.ts';
import { KvCache } from './kv-cache.ts';
import { TargetLayers, checkPositive } from './layers.ts';
import type { DraftTargetTables } from './target-tables.ts';
import { streamTargetWeights, type StreamOptions } from './weight-stream.ts';
import { releaseTargetWeights, targetWeightBytes, uploadTargetWeights, type GpuTargetWeights } from './weights.ts';

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

export class TargetModel implements DraftTargetTables {
  /** The kernels of each pass and the tables they share (layers.ts). */
  private readonly layers: TargetLayers;

  private constructor(
    readonly gpu: Gpu,
    readonly config: TargetModelConfig,
    readonly weights: GpuTargetWeights,
    readonly weightPrecision: WeightPrecision,
  ) {
    this.layers = new TargetLayers(gpu, config, weights);
  }

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

  /**
   * Streams a checkpoint's weights onto the GPU slice by slice (./weight-stream.ts): the way every
   * run loads its target, with host memory bounded by one slice. Default precision 'f32'.
   */
  static async load(
    gpu: Gpu,
    source: HfCheckpointSource,
    options: TargetModelOptions & Pick<StreamOptions, 'onProgress'> = {},
  ): Promise<TargetModel> {
    const precision = options.weightPrecision ?? 'f32';
    const weights = await streamTargetWeights(gpu, source, precision, { onProgress: options.onProgress });
    return new TargetModel(gpu, source.config, weights, precision);
  }

  /** DraftTargetTables: the embedding [V, H], borrowed by the draft; the lm_head rows of `used`, f32 [D, Ht]. */
  get embedTokens(): Tensor {
    return this.weights.embedTokens;
  }
  draftHead(used: ArrayLike<number>): Promise<DraftHead> {
    return DraftHead.gather(this.gpu, this.weights, used);
  }

  /** Bytes the weights occupy on the GPU (a tied lm_head counted once). */
  get weightBytes(): number {
    return targetWeightBytes(this.weights);
  }

  destroy(): void {
    releaseTargetWeights(this.gpu, this.weights);
    this.layers.release();
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
    const prefill = this.layers.prefillRows(batch, seqLen, input.attentionMask);
    const h = await this.layers.embed(input.inputIds, rows, 'target.h');
    const hidden = new Map<number, Tensor>();
    const keep = (index: number): void => {
      if (wanted.has(index)) hidden.set(index, gpu.clone(h, `target.hidden_states.${index}`));
    };
    try {
      keep(0);
      for (let l = 0; l < c.numLayers; l++) {
        await this.layers.prefillLayer(l, h, prefill);
        if (l + 1 < c.numLayers) keep(l + 1);
      }
      const lastLayerPrenorm = options.lastLayerPrenorm ? gpu.clone(h, 'target.last_layer_prenorm') : undefined;
      const normed = gpu.tensor([rows, c.hiddenSize], 'f32', `target.hidden_states.${c.numLayers}`);
      await this.layers.rmsnorm(h, this.weights.finalNorm, normed, rows, c.hiddenSize);
      let logits: Tensor | undefined;
      if (options.logits ?? true) {
        logits = gpu.tensor([rows, c.vocabSize], 'f32', 'target.logits');
        await this.layers.lmHeadInto(normed, logits, rows);
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
    const prefill = this.layers.prefillRows(input.batch, input.seqLen, input.attentionMask);
    try {
      await this.layers.prefillLayer(layer, h, prefill);
    } finally {
      this.gpu.release(prefill.positions, prefill.mask);
    }
  }

  /** An empty cache for `batch` sequences of at most `maxLen` tokens (prompt + generated). */
  createKvCache(batch: number, maxLen: number): KvCache {
    checkPositive('createKvCache: batch', batch);
    checkPositive('createKvCache: maxLen', maxLen);
    return KvCache.allocate(this.gpu, this.config, batch, maxLen);
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
    const rowsInfo = this.layers.prefillRows(batch, seq, mask);
    const h = await this.layers.embed(ids, rows, 'prefill.h');
    const last = gpu.tensor([batch, c.hiddenSize], 'f32', 'prefill.last');
    try {
      for (let l = 0; l < c.numLayers; l++) await this.layers.prefillLayer(l, h, rowsInfo, cache);
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
      const logits = await this.layers.finalLogits(last, batch);
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
    this.layers.ensureRope(Math.max(...cache.lengths) + 1);
    const positions = gpu.upload([batch], 'i32', cache.lengths, 'decode.positions');
    const visible = gpu.upload(
      [batch],
      'i32',
      cache.lengths.map((n) => n + 1),
      'decode.lengths',
    );
    const h = await this.layers.embed(tokens, batch, 'decode.h');
    try {
      for (let l = 0; l < c.numLayers; l++) await this.layers.decodeLayer(l, h, cache, positions, visible);
      const logits = await this.layers.finalLogits(h, batch);
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
    options: {
      hiddenStates?: readonly number[];
      /** 'last': the logits of the last new row only, [1, vocab] (a prefill needs no more); default every row's. */
      logits?: 'all' | 'last';
    } = {},
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
    this.layers.ensureRope(start + m);
    // An empty cache takes the causal prefill kernel; otherwise one decode dispatch per new row.
    const rows = start === 0 ? this.layers.prefillRows(1, m) : undefined;
    const positions = rows
      ? rows.positions
      : gpu.upload(
          [m],
          'i32',
          Int32Array.from({ length: m }, (_, i) => start + i),
          'extend.positions',
        );
    const h = await this.layers.embed(tokens, m, 'extend.h');
    const hidden = new Map<number, Tensor>();
    const keep = (index: number): void => {
      if (wanted.has(index)) hidden.set(index, gpu.clone(h, `target.hidden_states.${index}`));
    };
    try {
      keep(0);
      for (let l = 0; l < c.numLayers; l++) {
        if (rows) await this.layers.prefillLayer(l, h, rows, cache);
        else await this.layers.extendLayer(l, h, cache, positions, start, m);
        if (l + 1 < c.numLayers) keep(l + 1);
      }
      const normed = gpu.tensor([m, c.hiddenSize], 'f32', `target.hidden_states.${c.numLayers}`);
      await this.layers.rmsnorm(h, this.weights.finalNorm, normed, m, c.hiddenSize);
      // A long prompt's [m, vocab] logits would be a generation's largest tensor: a prefill takes its last row.
      const rowsOut = options.logits === 'last' ? 1 : m;
      const headIn = rowsOut === m ? normed : gpu.tensor([1, c.hiddenSize], 'f32', 'target.last');
      if (headIn !== normed) copyRows(gpu, normed, m - 1, headIn, 0, 1);
      const logits = gpu.tensor([rowsOut, c.vocabSize], 'f32', 'target.logits');
      await this.layers.lmHeadInto(headIn, logits, rowsOut).finally(() => headIn !== normed && gpu.release(headIn));
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
      await this.layers.lmHeadInto(x, logits, x.numel / H);
      return logits;
    } catch (err) {
      this.gpu.release(logits);
      throw err;
    }
  }
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
