/**
 * The kernels of the target model's passes (model.ts), layer by layer: the token embedding, one
 * decoder layer in each of its three attention forms, the final norm and the lm_head, and the GPU
 * tables they share (the RoPE (cos, sin) table, grown on demand, and the ones column that adds a
 * bias as a K = 1 product).
 *
 * A layer is as model.ts's header writes it, with its attention in one of three forms:
 *   prefill — causal GQA over a right-padded batch (keys hidden by the mask), optionally
 *             writing the keys and values into a KvCache;
 *   decode  — one new row per sequence against its cache;
 *   extend  — m new rows of a batch-1 cache, each attending to the cache and the rows before it.
 *
 * Kept apart from model.ts, which checks each entry point's arguments, collects the hidden states it
 * returns and keeps the cache lengths: this file is what runs on the GPU for one pass, with no
 * decision about which.
 */
import type { TargetModelConfig } from '../../config/hf-config.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { rowChunkRows } from '../../gpu/row-chunks.ts';
import { Tensor } from '../../gpu/tensor.ts';
import { copyRows } from '../../gpu/tensor-views.ts';
import { attentionForward } from '../../kernels/attention.ts';
import { decodeAttentionForward } from '../../kernels/attention-decode.ts';
import { extendAttentionForward } from '../../kernels/attention-extend.ts';
import { copyStrided } from '../../kernels/copy-strided.ts';
import { embeddingForward } from '../../kernels/embedding.ts';
import { linearForward } from '../../kernels/linear.ts';
import { matmul } from '../../kernels/matmul.ts';
import { rmsnormForward } from '../../kernels/rmsnorm.ts';
import { buildRopeTable, ropeTableForward } from '../../kernels/rope-table.ts';
import { swigluForward } from '../../kernels/swiglu.ts';
import type { KvCache } from './kv-cache.ts';
import type { GpuLayerWeights, GpuTargetWeights } from './weights.ts';

/** Row geometry of one prefill pass, with its position and mask tensors already on the GPU. */
export interface PrefillRows {
  readonly batch: number;
  readonly seq: number;
  /** i32 [batch·seq]: t for row (b, t). */
  readonly positions: Tensor;
  /** i32 [batch, seq]. */
  readonly mask: Tensor;
}

export class TargetLayers {
  private ones?: Tensor;
  /** RoPE (cos, sin) table for positions 0..ropeRows−1 (kernels/rope-table.ts), grown on demand. */
  private rope?: Tensor;
  private ropeRows = 0;

  constructor(
    readonly gpu: Gpu,
    readonly config: TargetModelConfig,
    readonly weights: GpuTargetWeights,
  ) {}

  /** Releases the shared tables (the weights belong to the model). */
  release(): void {
    if (this.ones) this.gpu.release(this.ones);
    if (this.rope) this.gpu.release(this.rope);
    this.ones = undefined;
    this.rope = undefined;
  }

  /** The row layout of a prefill pass over `batch` rows of `seq` positions, uploaded (and the RoPE table grown to cover it). */
  prefillRows(batch: number, seq: number, attentionMask?: ArrayLike<number>): PrefillRows {
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

  /** One layer over m new rows of a batch-1 cache holding `start` tokens (extend attention). */
  async extendLayer(l: number, h: Tensor, cache: KvCache, positions: Tensor, start: number, m: number): Promise<void> {
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

  async prefillLayer(l: number, h: Tensor, p: PrefillRows, cache?: KvCache): Promise<void> {
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

  async decodeLayer(l: number, h: Tensor, cache: KvCache, positions: Tensor, visible: Tensor): Promise<void> {
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

  /**
   * h += o·W_oᵀ (+ bias); then h += down(silu(gate(x)) ⊙ up(x)) with x = RMSNorm(h). The MLP runs over
   * row chunks when [rows, I] f32 is over a binding or 128 MiB (gpu/row-chunks.ts): a capture of 8,192
   * tokens of an 8B target would otherwise hold three 448 MiB tensors. Each row is computed as whole.
   */
  private async attentionOutputAndMlp(w: GpuLayerWeights, o: Tensor, h: Tensor, rows: number): Promise<void> {
    const c = this.config;
    const gpu = this.gpu;
    const H = c.hiddenSize;
    const I = c.intermediateSize;
    await this.linear(o, w.oProj, w.oBias, h, rows, c.numHeads * c.headDim, H, true);
    const x = gpu.tensor([rows, H], 'f32', 'mlp.x');
    try {
      await this.rmsnorm(h, w.postAttentionNorm, x, rows, H);
      const chunk = rowChunkRows(rows, I * 4, gpu.maxBindingBytes);
      for (let r0 = 0; r0 < rows; r0 += chunk) {
        const n = Math.min(chunk, rows - r0);
        const whole = n === rows;
        const xC = whole ? x : gpu.tensor([n, H], 'f32', 'mlp.x.rows');
        const hC = whole ? h : gpu.tensor([n, H], 'f32', 'mlp.h.rows');
        const gate = gpu.tensor([n, I], 'f32', 'mlp.gate');
        const up = gpu.tensor([n, I], 'f32', 'mlp.up');
        const act = gpu.tensor([n, I], 'f32', 'mlp.act');
        try {
          if (!whole) {
            copyRows(gpu, x, r0, xC, 0, n);
            copyRows(gpu, h, r0, hC, 0, n);
          }
          await this.linear(xC, w.gateProj, w.gateBias, gate, n, H, I);
          await this.linear(xC, w.upProj, w.upBias, up, n, H, I);
          await swigluForward(gpu, gate, up, act, { rows: n, inter: I });
          await this.linear(act, w.downProj, w.downBias, hC, n, I, H, true);
          if (!whole) copyRows(gpu, hC, 0, h, r0, n);
        } finally {
          gpu.release(gate, up, act);
          if (!whole) gpu.release(xC, hC);
        }
      }
    } finally {
      gpu.release(x);
    }
  }

  /** out (+)= x·Wᵀ (+ bias), x [rows, inDim], W [outDim, inDim] (W may be split into row parts: kernels/linear.ts). */
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
    await linearForward(this.gpu, x, w, out, { rows, inFeatures: inDim, outFeatures: outDim }, { beta: accumulate ? 1 : 0 });
    // Bias as the K = 1 product ones[rows, 1] · bias[1, outDim], accumulated.
    if (bias) await matmul(this.gpu, this.onesColumn(rows), bias, out, { M: rows, N: outDim, K: 1 }, { beta: 1 });
  }

  /** Makes sure the RoPE table covers positions 0..positions−1. */
  ensureRope(positions: number): void {
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

  async rmsnorm(x: Tensor, w: Tensor, y: Tensor, rows: number, hidden: number): Promise<void> {
    const invRms = this.gpu.tensor([rows], 'f32', 'rmsnorm.invRms');
    try {
      await rmsnormForward(this.gpu, x, w, y, invRms, { rows, hidden, eps: this.config.rmsNormEps });
    } finally {
      this.gpu.release(invRms);
    }
  }

  async embed(ids: ArrayLike<number>, rows: number, label: string): Promise<Tensor> {
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
  async finalLogits(h: Tensor, rows: number): Promise<Tensor> {
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
   * logits = x·lm_headᵀ. A lm_head split into vocabulary parts, or logits split into row parts (a
   * real vocabulary's logits exceed one binding past a few hundred rows), go block by block
   * through linearForward (kernels/linear.ts); unsplit, it is the single matmul.
   */
  async lmHeadInto(x: Tensor, logits: Tensor, rows: number): Promise<void> {
    const { hiddenSize: H, vocabSize: V } = this.config;
    await linearForward(this.gpu, x, this.weights.lmHead, logits, { rows, inFeatures: H, outFeatures: V });
  }
}

/** Every entry point's count check (batch, sequence length, capacity), in the one wording. */
export function checkPositive(what: string, v: number): void {
  if (!Number.isInteger(v) || v < 1) throw new Error(`TargetModel ${what} must be a positive integer, got ${v}`);
}
