/**
 * Decode attention: one query row per sequence against that sequence's KV cache, for token-by-token
 * generation after a prefill (shaders/attention/decode.wgsl). The prefill itself uses the causal
 * flash kernel in attention.ts, whose queries and keys share one length and so cannot serve a
 * single query against a longer cache.
 *
 * Layouts (row-major f32 unless noted):
 *   q, o          [B, nH, hd]       one token per sequence (RoPE applied to q)
 *   kCache, vCache[B, T, nKV, hd]   T = cache capacity; rows below lengths[b] hold real tokens,
 *                                   the current token's own key/value included
 *   lengths       [B] i32           keys visible to sequence b (0 ≤ lengths[b] ≤ T)
 * Query head h reads kv head h / (nH / nKV); scale 1/√hd. A sequence with length 0 outputs zeros.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type DType, type Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { shaderSource } from './shader-source.ts';

/**
 * The largest head dim the decode kernel takes: it sizes the shader's staged query row (the shader
 * receives it as a WGSL constant and checks it against its per-invocation output dims).
 */
export const DECODE_MAX_HEAD_DIM = 128;

export const DECODE_ATTENTION_KERNEL: KernelDef = {
  name: 'attention/decode',
  source: shaderSource('attention/decode', { MAX_HEAD_DIM: DECODE_MAX_HEAD_DIM }),
  bindings: ['uniform', 'read', 'read', 'read', 'read', 'write'],
};

export interface DecodeAttentionDims {
  batch: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** Cache capacity T (rows per sequence in kCache / vCache). */
  maxLen: number;
}

export interface DecodeAttentionTensors {
  q: Tensor;
  kCache: Tensor;
  vCache: Tensor;
  lengths: Tensor;
  o: Tensor;
}

function check(t: Tensor, name: string, dtype: DType, numel: number, layout: string): void {
  if (t.dtype !== dtype) throw new Error(`decodeAttention: ${name} (${t.label}) must be ${dtype}, got ${t.dtype}`);
  if (t.numel !== numel)
    throw new Error(`decodeAttention: ${name} (${t.label} ${fmtShape(t.shape)}) has ${t.numel} elements; layout ${layout} needs ${numel}`);
  if (t.isChunked)
    throw new Error(`decodeAttention: ${name} (${t.label}) is split into ${t.parts.length} parts; attention needs one binding`);
}

/** Encode o = attention(q, cache[:lengths]) (no submit). */
export async function decodeAttentionForward(gpu: Gpu, t: DecodeAttentionTensors, dims: DecodeAttentionDims): Promise<void> {
  for (const key of ['batch', 'heads', 'kvHeads', 'headDim', 'maxLen'] as const) {
    const v = dims[key];
    if (!Number.isInteger(v) || v < 1) throw new Error(`decodeAttention: ${key} must be a positive integer, got ${v}`);
  }
  const { batch: B, heads: H, kvHeads: G, headDim: D, maxLen: T } = dims;
  if (H % G !== 0) throw new Error(`decodeAttention: heads ${H} must be a multiple of kvHeads ${G} (grouped-query attention)`);
  if (D > DECODE_MAX_HEAD_DIM) throw new Error(`decodeAttention: head dim ${D} exceeds ${DECODE_MAX_HEAD_DIM}`);
  const perDim = gpu.ctx.limits.maxComputeWorkgroupsPerDimension ?? 65535;
  if (H > perDim || B > perDim)
    throw new Error(`decodeAttention: grid (${H}, ${B}) exceeds the device's ${perDim} workgroups per dimension`);
  check(t.q, 'q', 'f32', B * H * D, '[B, nH, hd]');
  check(t.kCache, 'kCache', 'f32', B * T * G * D, '[B, T, nKV, hd]');
  check(t.vCache, 'vCache', 'f32', B * T * G * D, '[B, T, nKV, hd]');
  check(t.lengths, 'lengths', 'i32', B, '[B]');
  check(t.o, 'o', 'f32', B * H * D, '[B, nH, hd]');
  const kernel = await gpu.pipelines.get(DECODE_ATTENTION_KERNEL, { HEAD_DIM: D });
  const uniforms = new UniformWriter()
    .u32(B)
    .u32(H)
    .u32(G)
    .u32(T)
    .f32(1 / Math.sqrt(D))
    .u32(0)
    .u32(0)
    .u32(0)
    .finish();
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [t.q.binding(), t.kCache.binding(), t.vCache.binding(), t.lengths.binding(), t.o.binding()],
    [H, B],
  );
}
