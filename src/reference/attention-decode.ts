/**
 * Float64 reference for the decode attention kernel (src/kernels/attention-decode.ts): one query
 * row per sequence against the first lengths[b] rows of its KV cache.
 *
 * Layouts: q, o [B, nH, hd]; kCache, vCache [B, T, nKV, hd]; lengths [B]. Query head h reads kv
 * head h / (nH / nKV); scale 1/√hd. A sequence with length 0 outputs zeros.
 */
export interface DecodeDims {
  batch: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  maxLen: number;
}

export function decodeAttentionRef(
  q: ArrayLike<number>,
  kCache: ArrayLike<number>,
  vCache: ArrayLike<number>,
  lengths: ArrayLike<number>,
  d: DecodeDims,
): Float64Array {
  const { batch: B, heads: H, kvHeads: G, headDim: D, maxLen: T } = d;
  const group = H / G;
  const scale = 1 / Math.sqrt(D);
  const o = new Float64Array(B * H * D);
  for (let b = 0; b < B; b++) {
    const len = Math.min(Math.max(lengths[b], 0), T);
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / group);
      const qBase = (b * H + h) * D;
      const scores = new Float64Array(len);
      let max = Number.NEGATIVE_INFINITY;
      for (let u = 0; u < len; u++) {
        const kBase = ((b * T + u) * G + g) * D;
        let dot = 0;
        for (let i = 0; i < D; i++) dot += q[qBase + i] * kCache[kBase + i];
        scores[u] = dot * scale;
        max = Math.max(max, scores[u]);
      }
      let denom = 0;
      for (let u = 0; u < len; u++) denom += Math.exp(scores[u] - max);
      for (let u = 0; u < len; u++) {
        const p = Math.exp(scores[u] - max) / denom;
        const vBase = ((b * T + u) * G + g) * D;
        for (let i = 0; i < D; i++) o[qBase + i] += p * vCache[vBase + i];
      }
    }
  }
  return o;
}
