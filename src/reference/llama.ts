/**
 * Float64 CPU reference forward for Llama / Qwen2 / Qwen3 decoders, written to be read against HF
 * transformers' eager implementation rather than to be fast:
 *
 *   h₀ = embed[ids]
 *   per layer:  a = RMSNorm(h) → q,k,v projections (+bias) → [Qwen3: per-head RMSNorm on q,k] → RoPE
 *               → causal GQA attention over unpadded keys → o_proj;  h += a
 *               m = RMSNorm(h) → down(silu(gate(m)) ⊙ up(m));  h += m
 *   logits = lm_head(RMSNorm(h))
 *
 * Positions are 0..T−1 in every row, as HF uses when no position_ids are passed; the attention mask
 * only hides keys. A query that can see no key (a padded position before any real token) outputs
 * zeros: such positions are padding and never compared.
 */

/**
 * The decoder's shape as this oracle reads it. Declared here rather than imported, so the oracle
 * depends on nothing it checks; SpecLab's parsed `TargetModelConfig` fits it structurally.
 */
export interface TargetModelConfig {
  readonly hiddenSize: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly intermediateSize: number;
  readonly vocabSize: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
  readonly ropeScaling:
    | { readonly type: 'default' }
    | { readonly type: 'linear'; readonly factor: number }
    | {
        readonly type: 'llama3';
        readonly factor: number;
        readonly lowFreqFactor: number;
        readonly highFreqFactor: number;
        readonly originalMaxPositionEmbeddings: number;
      };
}

/** One decoder layer's weights, row-major like PyTorch (a Linear weight is [out, in]). */
export interface LayerWeights {
  readonly inputNorm: ArrayLike<number>;
  readonly qProj: ArrayLike<number>;
  readonly kProj: ArrayLike<number>;
  readonly vProj: ArrayLike<number>;
  readonly oProj: ArrayLike<number>;
  readonly qBias?: ArrayLike<number>;
  readonly kBias?: ArrayLike<number>;
  readonly vBias?: ArrayLike<number>;
  readonly oBias?: ArrayLike<number>;
  readonly qNorm?: ArrayLike<number>;
  readonly kNorm?: ArrayLike<number>;
  readonly postAttentionNorm: ArrayLike<number>;
  readonly gateProj: ArrayLike<number>;
  readonly upProj: ArrayLike<number>;
  readonly downProj: ArrayLike<number>;
  readonly gateBias?: ArrayLike<number>;
  readonly upBias?: ArrayLike<number>;
  readonly downBias?: ArrayLike<number>;
}

export interface TargetWeights {
  readonly embedTokens: ArrayLike<number>;
  readonly layers: readonly LayerWeights[];
  readonly finalNorm: ArrayLike<number>;
  readonly lmHead: ArrayLike<number>;
}

/**
 * HF's RoPE inverse frequencies in float64: θ^(−2i/d), divided by `factor` for linear scaling, and
 * Llama 3's wavelength-dependent blend (`_compute_llama3_parameters`).
 */
export function ropeInverseFrequencies(config: Pick<TargetModelConfig, 'headDim' | 'ropeTheta' | 'ropeScaling'>): Float64Array {
  const { headDim, ropeTheta, ropeScaling: s } = config;
  const inv = new Float64Array(headDim / 2);
  for (let i = 0; i < inv.length; i++) inv[i] = 1 / ropeTheta ** ((2 * i) / headDim);
  if (s.type === 'linear') for (let i = 0; i < inv.length; i++) inv[i] /= s.factor;
  if (s.type === 'llama3') {
    const lowFreqWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
    const highFreqWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
    for (let i = 0; i < inv.length; i++) {
      const wavelen = (2 * Math.PI) / inv[i];
      if (wavelen > lowFreqWavelen) inv[i] /= s.factor;
      else if (wavelen >= highFreqWavelen) {
        const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        inv[i] = (1 - smooth) * (inv[i] / s.factor) + smooth * inv[i];
      }
    }
  }
  return inv;
}

export interface ReferenceModel {
  readonly config: TargetModelConfig;
  readonly weights: TargetWeights;
}

export interface ForwardInput {
  /** Token ids, row-major [batch, seqLen]. */
  readonly inputIds: ArrayLike<number>;
  readonly batch: number;
  readonly seqLen: number;
  /** 1 = real token, 0 = padding, [batch, seqLen]; all ones when omitted. */
  readonly attentionMask?: ArrayLike<number>;
}

export interface ForwardOutput {
  /**
   * HF `output_hidden_states` convention, numLayers + 1 arrays of [batch, seqLen, hidden]: [0] the
   * embeddings, [i] the output of layer i−1, and the last one with the final RMSNorm applied.
   */
  readonly hiddenStates: Float64Array[];
  /** Output of the last layer before the final norm. */
  readonly lastLayerPrenorm: Float64Array;
  /** [batch, seqLen, vocab]. */
  readonly logits: Float64Array;
}

/** y[r, o] = Σᵢ x[r, i] · W[o, i] + b[o]  (PyTorch Linear: W is [out, in]). */
function linear(
  x: Float64Array,
  rows: number,
  inDim: number,
  w: ArrayLike<number>,
  outDim: number,
  bias?: ArrayLike<number>,
): Float64Array {
  const y = new Float64Array(rows * outDim);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < outDim; o++) {
      let sum = bias ? bias[o] : 0;
      for (let i = 0; i < inDim; i++) sum += x[r * inDim + i] * w[o * inDim + i];
      y[r * outDim + o] = sum;
    }
  }
  return y;
}

/** RMSNorm over consecutive groups of `dim` values: y = w ⊙ x / sqrt(mean(x²) + eps). */
function rmsNorm(x: Float64Array, dim: number, w: ArrayLike<number>, eps: number): Float64Array {
  const y = new Float64Array(x.length);
  for (let base = 0; base < x.length; base += dim) {
    let sumSq = 0;
    for (let j = 0; j < dim; j++) sumSq += x[base + j] ** 2;
    const inv = 1 / Math.sqrt(sumSq / dim + eps);
    for (let j = 0; j < dim; j++) y[base + j] = w[j] * x[base + j] * inv;
  }
  return y;
}

/**
 * In-place RoPE on [seqLen, heads, headDim] (HF rotate-half: the pairs are (j, j + headDim/2)),
 * position of row t is t.
 */
function applyRope(x: Float64Array, seqLen: number, heads: number, headDim: number, invFreq: Float64Array): void {
  const half = headDim / 2;
  for (let t = 0; t < seqLen; t++) {
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const cos = Math.cos(t * invFreq[i]);
        const sin = Math.sin(t * invFreq[i]);
        const a = x[base + i];
        const b = x[base + i + half];
        x[base + i] = a * cos - b * sin;
        x[base + i + half] = b * cos + a * sin;
      }
    }
  }
}

/** One sequence through one decoder layer's attention block (input already normed). */
function attention(
  c: TargetModelConfig,
  w: LayerWeights,
  x: Float64Array,
  seqLen: number,
  mask: ArrayLike<number>,
  invFreq: Float64Array,
): Float64Array {
  const { hiddenSize: H, numHeads, numKvHeads, headDim } = c;
  let q = linear(x, seqLen, H, w.qProj, numHeads * headDim, w.qBias);
  let k = linear(x, seqLen, H, w.kProj, numKvHeads * headDim, w.kBias);
  const v = linear(x, seqLen, H, w.vProj, numKvHeads * headDim, w.vBias);
  if (w.qNorm && w.kNorm) {
    q = rmsNorm(q, headDim, w.qNorm, c.rmsNormEps);
    k = rmsNorm(k, headDim, w.kNorm, c.rmsNormEps);
  }
  applyRope(q, seqLen, numHeads, headDim, invFreq);
  applyRope(k, seqLen, numKvHeads, headDim, invFreq);

  const group = numHeads / numKvHeads; // query heads sharing one KV head
  const scale = 1 / Math.sqrt(headDim);
  const out = new Float64Array(seqLen * numHeads * headDim);
  const scores = new Float64Array(seqLen);
  for (let h = 0; h < numHeads; h++) {
    const kvh = Math.floor(h / group);
    for (let i = 0; i < seqLen; i++) {
      const qBase = (i * numHeads + h) * headDim;
      let max = Number.NEGATIVE_INFINITY;
      for (let j = 0; j <= i; j++) {
        if (!mask[j]) {
          scores[j] = Number.NEGATIVE_INFINITY;
          continue;
        }
        const kBase = (j * numKvHeads + kvh) * headDim;
        let dot = 0;
        for (let d = 0; d < headDim; d++) dot += q[qBase + d] * k[kBase + d];
        scores[j] = dot * scale;
        max = Math.max(max, scores[j]);
      }
      if (max === Number.NEGATIVE_INFINITY) continue; // no visible key: padding, left as zeros
      let denom = 0;
      for (let j = 0; j <= i; j++) denom += scores[j] === Number.NEGATIVE_INFINITY ? 0 : Math.exp(scores[j] - max);
      for (let j = 0; j <= i; j++) {
        if (scores[j] === Number.NEGATIVE_INFINITY) continue;
        const p = Math.exp(scores[j] - max) / denom;
        const vBase = (j * numKvHeads + kvh) * headDim;
        for (let d = 0; d < headDim; d++) out[qBase + d] += p * v[vBase + d];
      }
    }
  }
  return linear(out, seqLen, numHeads * headDim, w.oProj, H, w.oBias);
}

/** SwiGLU MLP: down(silu(gate(x)) ⊙ up(x)). */
function mlp(c: TargetModelConfig, w: LayerWeights, x: Float64Array, seqLen: number): Float64Array {
  const { hiddenSize: H, intermediateSize: I } = c;
  const gate = linear(x, seqLen, H, w.gateProj, I, w.gateBias);
  const up = linear(x, seqLen, H, w.upProj, I, w.upBias);
  for (let i = 0; i < gate.length; i++) gate[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
  return linear(gate, seqLen, I, w.downProj, H, w.downBias);
}

export function forwardReference(model: ReferenceModel, input: ForwardInput): ForwardOutput {
  const { config: c, weights: w } = model;
  const { batch, seqLen, inputIds } = input;
  const H = c.hiddenSize;
  if (inputIds.length !== batch * seqLen) throw new Error(`forwardReference: ${inputIds.length} ids for batch ${batch} × seqLen ${seqLen}`);
  const invFreq = ropeInverseFrequencies(c);
  const rowSize = seqLen * H;
  const hiddenStates = Array.from({ length: c.numLayers + 1 }, () => new Float64Array(batch * rowSize));
  const lastLayerPrenorm = new Float64Array(batch * rowSize);
  const logits = new Float64Array(batch * seqLen * c.vocabSize);

  for (let b = 0; b < batch; b++) {
    const mask = input.attentionMask
      ? Array.from({ length: seqLen }, (_, t) => input.attentionMask![b * seqLen + t])
      : new Array<number>(seqLen).fill(1);
    let h = new Float64Array(rowSize);
    for (let t = 0; t < seqLen; t++) {
      const id = inputIds[b * seqLen + t];
      if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize)
        throw new Error(`forwardReference: token id ${id} at [${b}, ${t}] outside vocab ${c.vocabSize}`);
      for (let j = 0; j < H; j++) h[t * H + j] = w.embedTokens[id * H + j];
    }
    hiddenStates[0].set(h, b * rowSize);
    for (let l = 0; l < c.numLayers; l++) {
      const lw = w.layers[l];
      const a = attention(c, lw, rmsNorm(h, H, lw.inputNorm, c.rmsNormEps), seqLen, mask, invFreq);
      h = h.map((v, i) => v + a[i]);
      const m = mlp(c, lw, rmsNorm(h, H, lw.postAttentionNorm, c.rmsNormEps), seqLen);
      h = h.map((v, i) => v + m[i]);
      // HF reports the last layer's output only after the final norm.
      if (l < c.numLayers - 1) hiddenStates[l + 1].set(h, b * rowSize);
    }
    lastLayerPrenorm.set(h, b * rowSize);
    const normed = rmsNorm(h, H, w.finalNorm, c.rmsNormEps);
    hiddenStates[c.numLayers].set(normed, b * rowSize);
    logits.set(linear(normed, seqLen, H, w.lmHead, c.vocabSize), b * seqLen * c.vocabSize);
  }
  return { hiddenStates, lastLayerPrenorm, logits };
}

/**
 * Greedy decoding: append argmax of the last position's logits `maxNewTokens` times. Recomputes the
 * whole prefix each step (no KV cache): slow but obviously equal to the cached result.
 * Ties go to the lowest id, as torch.argmax does.
 */
export function greedyGenerateReference(model: ReferenceModel, promptIds: ArrayLike<number>, maxNewTokens: number): number[] {
  const ids = Array.from(promptIds);
  const V = model.config.vocabSize;
  const generated: number[] = [];
  for (let step = 0; step < maxNewTokens; step++) {
    const { logits } = forwardReference(model, { inputIds: ids, batch: 1, seqLen: ids.length });
    const last = logits.subarray((ids.length - 1) * V, ids.length * V);
    let best = 0;
    for (let v = 1; v < V; v++) if (last[v] > last[best]) best = v;
    generated.push(best);
    ids.push(best);
  }
  return generated;
}
