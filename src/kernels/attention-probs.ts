/**
 * Attention probabilities of one sequence at one EAGLE3 TTT step, materialised
 * (shaders/attention/probs.wgsl; float64 twin src/reference/attention-probs.ts). The flash kernels of
 * attention.ts never store the S × S probabilities; the lab's draft insight (docs/insight.md) reads
 * them for one held-out sample, step by step, from the same Q, K cache, mask and log-sum-exp the
 * forward used. Read-only: no backward, nothing but P is written.
 *
 * Layouts (row-major f32 unless noted; as attention.ts):
 *   q       [B, S, nH, hd]        this step's RoPE'd queries
 *   kCache  [J, B, S, nKV, hd]    J ≥ step + 1
 *   mask    [B, S] i32
 *   lse     [B, nH, S]            written by tttAttentionForward for this step
 *   probs   [slots, nH, S, W]     W = S + slots − 1: columns 0..S−1 are the step-0 keys, column
 *                                 S + j − 1 the diagonal key K_j[i]; only slot `step` is written
 * Every head is written; a head average (what the lab shows by default) is a plain mean of these
 * rows, formed where it is displayed.
 *
 * The scores are summed in the order of the forward's lane split (a flash geometry's TPR; the lanes
 * variant sums a row in one lane, TPR 1), so pass the variant or geometry the forward ran with
 * (default: the variant and geometry policies' picks, the forward's defaults).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type DType, type Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { LANES_GEOMETRY, resolveAttentionVariant, type AttentionVariant } from './attention.ts';
import { FLASH_GEOMETRY, resolveGeometry, type GeometryChoice, type TttAttentionDims } from './attention-geometry.ts';
import { shaderSource } from './shader-source.ts';

/**
 * Workgroup width of the shader (key columns per workgroup): appended to its source as the WGSL
 * constant WG, and the grid's x count is ceil(W / this).
 */
const ATTENTION_PROBS_WG = 64;

function probsKernel(tpr: number): KernelDef {
  return {
    // The `flash` geometry's TPR keeps the plain shader name (the registry lists that one).
    name: tpr === FLASH_GEOMETRY.TPR ? 'attention/probs' : `attention/probs@tpr${tpr}`,
    source: shaderSource('attention/probs', { WG: ATTENTION_PROBS_WG, TPR: tpr }),
    bindings: ['uniform', 'read', 'read', 'read', 'read', 'write'],
  };
}

/** The kernel with the `flash` geometry's lane split: the one the registry compiles everywhere. */
export const ATTENTION_PROBS_KERNEL: KernelDef = probsKernel(FLASH_GEOMETRY.TPR);

const KERNELS = new Map<number, KernelDef>([[FLASH_GEOMETRY.TPR, ATTENTION_PROBS_KERNEL]]);

function kernelFor(tpr: number): KernelDef {
  let k = KERNELS.get(tpr);
  if (!k) {
    k = probsKernel(tpr);
    KERNELS.set(tpr, k);
  }
  return k;
}

export interface AttentionProbsDims extends TttAttentionDims {
  /** The batch row (sequence) whose probabilities are written. */
  sample: number;
  /** TTT slots of `probs` (the unroll length); sets the key width W = S + slots − 1. */
  slots: number;
}

export interface AttentionProbsTensors {
  q: Tensor;
  kCache: Tensor;
  mask: Tensor;
  lse: Tensor;
  probs: Tensor;
}

export interface AttentionProbsOptions {
  /** The variant the forward ran with; default chooseAttentionVariant's, or `flash` when a geometry is given. */
  variant?: AttentionVariant;
  /** The flash geometry the forward ran with (its TPR sets the score summation order). */
  geometry?: GeometryChoice;
}

/**
 * The lane split whose summation order reproduces the forward's scores bit for bit: TPR of the
 * flash geometry, or the lanes variant's (whole rows in one lane). Resolved as the forward resolves it.
 */
export function probsLaneSplit(gpu: Gpu, dims: TttAttentionDims, options: AttentionProbsOptions = {}): number {
  if (resolveAttentionVariant(gpu.ctx, dims, options) === 'lanes') return LANES_GEOMETRY.TPR;
  return resolveGeometry(options.geometry, dims, gpu.ctx.limits).TPR;
}

/** Key columns per query row: S step-0 keys and slots − 1 diagonal keys. */
export function probsWidth(seq: number, slots: number): number {
  return seq + slots - 1;
}

/** Encode P[step] = the step's attention probabilities of sequence `sample` (no submit). */
export async function attentionProbs(
  gpu: Gpu,
  t: AttentionProbsTensors,
  dims: AttentionProbsDims,
  options: AttentionProbsOptions = {},
): Promise<void> {
  for (const key of ['batch', 'seq', 'heads', 'kvHeads', 'headDim', 'slots'] as const) {
    const v = dims[key];
    if (!Number.isInteger(v) || v < 1) throw new Error(`attentionProbs: ${key} must be a positive integer, got ${v}`);
  }
  const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D, step, sample, slots } = dims;
  if (!Number.isInteger(step) || step < 0 || step >= slots)
    throw new Error(`attentionProbs: step must be an integer in [0, ${slots}) (slots), got ${step}`);
  if (!Number.isInteger(sample) || sample < 0 || sample >= B)
    throw new Error(`attentionProbs: sample must be an integer in [0, ${B}) (batch), got ${sample}`);
  if (H % G !== 0) throw new Error(`attentionProbs: heads ${H} must be a multiple of kvHeads ${G} (grouped-query attention)`);
  const W = probsWidth(S, slots);
  check(t.q, 'q', 'f32', B * S * H * D, '[B, S, nH, hd]');
  const slot = B * S * G * D;
  if (t.kCache.dtype !== 'f32' || t.kCache.numel % slot !== 0 || t.kCache.numel / slot < step + 1) {
    throw new Error(
      `attentionProbs: kCache (${t.kCache.label} ${t.kCache.dtype}${fmtShape(t.kCache.shape)}) must be f32 [J ≥ ${step + 1}, B, S, nKV, hd] (a multiple of ${slot} elements)`,
    );
  }
  check(t.kCache, 'kCache', 'f32', t.kCache.numel, '[J, B, S, nKV, hd]');
  check(t.mask, 'mask', 'i32', B * S, '[B, S]');
  check(t.lse, 'lse', 'f32', B * H * S, '[B, nH, S]');
  check(t.probs, 'probs', 'f32', slots * H * S * W, '[slots, nH, S, S + slots − 1]');
  const perDim = gpu.ctx.limits.maxComputeWorkgroupsPerDimension ?? 65535;
  if (S > perDim || H > perDim)
    throw new Error(
      `attentionProbs: grid (${Math.ceil(W / ATTENTION_PROBS_WG)}, ${S}, ${H}) exceeds the device's ${perDim} workgroups per dimension`,
    );
  const kernel = await gpu.pipelines.get(kernelFor(probsLaneSplit(gpu, dims, options)), { HEAD_DIM: D });
  const uniforms = new UniformWriter()
    .u32(B)
    .u32(S)
    .u32(H)
    .u32(G)
    .u32(step)
    .u32(sample)
    .u32(W)
    .u32(step)
    .f32(1 / Math.sqrt(D))
    .u32(0)
    .u32(0)
    .u32(0)
    .finish();
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [t.q.binding(), t.kCache.binding(), t.mask.binding(), t.lse.binding(), t.probs.binding()],
    [Math.ceil(W / ATTENTION_PROBS_WG), S, H],
  );
}

function check(t: Tensor, name: string, dtype: DType, numel: number, layout: string): void {
  if (t.dtype !== dtype) throw new Error(`attentionProbs: ${name} (${t.label}) must be ${dtype}, got ${t.dtype}`);
  if (t.numel !== numel)
    throw new Error(`attentionProbs: ${name} (${t.label} ${fmtShape(t.shape)}) has ${t.numel} elements; layout ${layout} needs ${numel}`);
  if (t.isChunked) throw new Error(`attentionProbs: ${name} (${t.label}) is split into ${t.parts.length} parts; it must fit one binding`);
}
