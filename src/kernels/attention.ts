/**
 * Attention kernels: causal attention with grouped-query heads and key padding, and the EAGLE3
 * test-time-training ("cache_hidden", diagonal) attention of docs/eagle3.md §4, forward and
 * backward, flash style (the B·H·S·S score matrix is never stored).
 *
 * Layouts (row-major, f32 unless noted):
 *   q, o, dO, dQ           [B, S, nH, hd]    (= [B·S, nH·hd], the q projection's natural output)
 *   k, v, dK, dV           [B, S, nKV, hd]
 *   kCache, vCache, dKCache, dVCache
 *                          [J, B, S, nKV, hd] with J ≥ step + 1: slot j holds K_j / V_j of TTT step j
 *                                            (all RoPE-rotated by the caller). Allocate J for the
 *                                            maximum TTT length once; every step binds the same buffer.
 *   mask                   [B, S] i32        1 = real token, 0 = padding
 *   lse                    [B, nH, S]        log-sum-exp per (b, h, row), saved by the forward
 * Query head h uses kv head h / (nH / nKV); scale 1/√hd. Tensors are checked by element count and
 * dtype (any shape annotation with the right count is accepted, since projections produce 2-D views).
 *
 * TTT semantics at step k: query row t attends to step-0 keys u ≤ t with mask[u] = 1, plus the single
 * key K_j[t] for each j = 1..k (never masked); softmax over those S + k scores. Plain causal
 * attention is exactly step 0 with a one-slot cache, so both entry points share the same kernels.
 *
 * Rows with no allowed key (every step-0 key u ≤ t padded; only possible at step 0, e.g. left
 * padding) output 0, get lse 0, and receive and pass on zero gradients — never NaN. Outputs of
 * padded query rows are otherwise computed normally (finite, don't-care).
 *
 * Kernels (shaders/attention/*.wgsl), variant `flash` (baseline, no features; below) and `lanes`
 * (src/kernels/attention-lanes.ts: the same contract for CPU-like adapters with subgroups):
 *   forward   — O, L; online softmax over key tiles streamed through workgroup memory.
 *   prep      — rowStats = (L, D) with D = rowsum(dO ⊙ O), packed so the backward kernels stay ≤ 8
 *               storage bindings.
 *   dq        — dQ, recomputing P = exp(s − L) tile by tile.
 *   dkv       — dK_0/dV_0 (summed over the query heads of each kv group inside one workgroup, in a
 *               fixed order: deterministic, no atomics) and the diagonal dK_j/dV_j, j = 1..k.
 *   dqPrep    — lanes only: prep and dq in one dispatch, where the device binds its nine buffers.
 * Their launch geometry (tiles, invocations per row) is a record chosen per head dim by
 * chooseAttentionGeometry (src/kernels/attention-geometry.ts); `{ geometry: 'flash' }` selects the
 * original one. dQ / dK / dV do not depend on the key / query tile sizes; O and L depend on BC in
 * their last bits (online-softmax grouping), and TPR sets the dot products' summation order.
 */
import type { GpuContext } from '../gpu/context.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { fmtShape, type DType, type Tensor } from '../gpu/tensor.ts';
import { storageLimitUnfit } from '../gpu/pipeline-cache.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import {
  chooseAttentionGeometry,
  kernelsFor,
  resolveGeometry,
  type AttentionDims,
  type AttentionLimits,
  type FlashGeometry,
  type FlashKernels,
  type GeometryChoice,
  type TttAttentionDims,
} from './attention-geometry.ts';
import { LANES_GEOMETRY_HD128, LANES_SUBGROUP, lanesFor, lanesUnsupported, type AttentionDeviceFacts } from './attention-lanes.ts';

export {
  LANES_GEOMETRY,
  LANES_KERNELS,
  LANES_KERNELS_HD128,
  LANES_ONLY_KERNELS,
  lanesFor,
  lanesUnsupported,
  type AttentionDeviceFacts,
} from './attention-lanes.ts';
export {
  ATTENTION_GEOMETRIES,
  ATTENTION_KERNELS,
  FLASH_GEOMETRY,
  checkGeometry,
  chooseAttentionGeometry,
  flashKernels,
  flashWorkgroupBytes,
  type AttentionDims,
  type AttentionGeometryName,
  type AttentionLimits,
  type FlashGeometry,
  type FlashKernels,
  type GeometryChoice,
  type TttAttentionDims,
} from './attention-geometry.ts';

export type AttentionVariant = 'flash' | 'lanes';

/** Every variant, baseline first. */
export const ATTENTION_VARIANTS: readonly AttentionVariant[] = ['flash', 'lanes'];

/**
 * Head dims up to which the policy picks `lanes` (every head dim the lanes kernels serve,
 * LANES_GEOMETRY_HD128.MAX_HD). Measured on llvmpipe with `bench/attention-geometry.ts --geometries
 * 'flash;lanes'`: 5.5–10.6x flash's forward and backward at hd 16 (fixture), 32 (lab draft) and 64 (mid
 * draft) (bench/RESULTS.md, "Attention: the lanes variant"), and at hd 128 (a Qwen3 target's capture,
 * 16/8 heads) 1.47–1.50x the forward and 2.50–2.74x the backward ("Attention lanes for 128-wide heads").
 */
export const LANES_POLICY_MAX_HD = LANES_GEOMETRY_HD128.MAX_HD;

export function attentionDeviceFacts(ctx: GpuContext): AttentionDeviceFacts {
  return { fallbackAdapter: ctx.record.isFallbackAdapter, subgroupMinSize: ctx.record.subgroupMinSize };
}

/** Why `variant` cannot run `dims` on this device, or undefined when it can. */
export function attentionVariantUnsupported(
  variant: AttentionVariant,
  dims: AttentionDims,
  features: ReadonlySet<string>,
  facts: AttentionDeviceFacts,
  limits: AttentionLimits,
): string | undefined {
  if (variant === 'lanes') return lanesUnsupported(dims, features, facts, limits);
  try {
    chooseAttentionGeometry(dims, limits);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * Pick the attention variant for a shape on a device, or explain why none fits. Pure: the same
 * inputs give the same answer.
 * - CPU adapters with subgroups of at least 8 lanes, head dim up to LANES_POLICY_MAX_HD: `lanes`
 *   (one row per lane, no workgroup memory or barriers, which cost more than they save on a CPU;
 *   the same reason the matmul policy picks its subgroup kernel there).
 * - Everything else: `flash`, with chooseAttentionGeometry's geometry, whose device checks apply
 *   (its error names attention when no geometry fits).
 */
export function chooseAttentionVariant(
  dims: AttentionDims,
  features: ReadonlySet<string>,
  limits: AttentionLimits,
  facts: AttentionDeviceFacts,
): AttentionVariant {
  if (facts.fallbackAdapter && dims.headDim <= LANES_POLICY_MAX_HD && lanesUnsupported(dims, features, facts, limits) === undefined)
    return 'lanes';
  chooseAttentionGeometry(dims, limits);
  return 'flash';
}

export interface AttentionForwardOptions {
  /** The kernel variant; default chooseAttentionVariant's, or `flash` when a geometry is given. */
  variant?: AttentionVariant;
  /** The flash launch geometry; default chooseAttentionGeometry's. `flash` is the original one. */
  geometry?: GeometryChoice;
}

export interface AttentionForwardTensors {
  q: Tensor;
  k: Tensor;
  v: Tensor;
  mask: Tensor;
  o: Tensor;
  lse: Tensor;
}

export interface AttentionBackwardTensors extends AttentionForwardTensors {
  dO: Tensor;
  dQ: Tensor;
  dK: Tensor;
  dV: Tensor;
}

export interface TttForwardTensors {
  q: Tensor;
  kCache: Tensor;
  vCache: Tensor;
  mask: Tensor;
  o: Tensor;
  lse: Tensor;
}

export interface TttBackwardTensors extends TttForwardTensors {
  dO: Tensor;
  dQ: Tensor;
  dKCache: Tensor;
  dVCache: Tensor;
}

export interface TttBackwardOptions extends AttentionForwardOptions {
  /**
   * Add into dKCache/dVCache slots 0..step instead of overwriting them. K_j receives gradient from
   * every step ≥ j, so a TTT backward that walks the steps in reverse accumulates.
   */
  accumulate?: boolean;
  /**
   * Run attention/prep and dq as two dispatches even where the variant's dqPrep could do both
   * (tests and benchmarks compare the two: the results have the same bits).
   */
  separatePrep?: boolean;
}

/** Encode causal GQA attention with key padding (no submit): writes o and lse. */
export async function attentionForward(
  gpu: Gpu,
  t: AttentionForwardTensors,
  dims: AttentionDims,
  options: AttentionForwardOptions = {},
): Promise<void> {
  await tttAttentionForward(gpu, { q: t.q, kCache: t.k, vCache: t.v, mask: t.mask, o: t.o, lse: t.lse }, { ...dims, step: 0 }, options);
}

/** Encode the backward of attentionForward (no submit): writes dQ, dK, dV. */
export async function attentionBackward(
  gpu: Gpu,
  t: AttentionBackwardTensors,
  dims: AttentionDims,
  options: AttentionForwardOptions = {},
): Promise<void> {
  await tttAttentionBackward(
    gpu,
    { q: t.q, kCache: t.k, vCache: t.v, mask: t.mask, o: t.o, lse: t.lse, dO: t.dO, dQ: t.dQ, dKCache: t.dK, dVCache: t.dV },
    { ...dims, step: 0 },
    options,
  );
}

/** Encode the TTT attention forward at `dims.step` (no submit): writes o and lse. */
export async function tttAttentionForward(
  gpu: Gpu,
  t: TttForwardTensors,
  dims: TttAttentionDims,
  options: AttentionForwardOptions = {},
): Promise<void> {
  checkDims(dims);
  const { batch: B, seq: S, heads: H } = dims;
  checkActivations(t, dims);
  const { geometry, kernels, lanes } = resolveKernels(gpu, dims, options);
  const kernel = await gpu.pipelines.get(kernels.forward, lanes);
  gpu.batcher.dispatch(
    kernel,
    params(dims, false),
    [t.q.binding(), t.kCache.binding(), t.vCache.binding(), t.mask.binding(), t.o.binding(), t.lse.binding()],
    [Math.ceil(S / geometry.BR), H, B],
  );
}

/**
 * Encode the TTT attention backward at `dims.step` (no submit): writes dQ and dKCache/dVCache
 * slots 0..step (other slots untouched). Needs the forward's o and lse.
 */
export async function tttAttentionBackward(
  gpu: Gpu,
  t: TttBackwardTensors,
  dims: TttAttentionDims,
  options: TttBackwardOptions = {},
): Promise<void> {
  checkDims(dims);
  const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D } = dims;
  checkActivations(t, dims);
  const rowElems = B * S * H * D;
  checkTensor(t.dO, 'dO', 'f32', rowElems, '[B, S, nH, hd]');
  checkTensor(t.dQ, 'dQ', 'f32', rowElems, '[B, S, nH, hd]');
  checkCache(t.dKCache, 'dKCache', dims);
  checkCache(t.dVCache, 'dVCache', dims);
  const { geometry, kernels, lanes } = resolveKernels(gpu, dims, options);
  // prep and dq in one dispatch where the variant has that kernel and the device binds its buffers.
  const dqPrep =
    options.separatePrep || !kernels.dqPrep || storageLimitUnfit(kernels.dqPrep, gpu.ctx.limits) !== undefined ? undefined : kernels.dqPrep;
  const [prep, dq, dkv] = await Promise.all([
    dqPrep ? undefined : gpu.pipelines.get(kernels.prep, { HEAD_DIM: D }),
    gpu.pipelines.get(dqPrep ?? kernels.dq, lanes),
    gpu.pipelines.get(kernels.dkv, lanes),
  ]);
  const uniforms = params(dims, options.accumulate ?? false);
  // (L, D) per row. Released right after encoding: a buffer handed out again later is only written
  // by work queued after these dispatches, so reuse is ordered behind them.
  const stats = gpu.tensor([B, H, S, 2], 'f32', 'attention.rowStats');
  const head = [t.q.binding(), t.kCache.binding(), t.vCache.binding(), t.mask.binding(), t.dO.binding()];
  if (prep) {
    const prepGrid = [Math.ceil((S * H) / geometry.PREP_WG), B] as const;
    gpu.batcher.dispatch(prep, uniforms, [t.o.binding(), t.dO.binding(), t.lse.binding(), stats.binding()], prepGrid);
  }
  const dqTail = dqPrep ? [t.o.binding(), t.lse.binding()] : [];
  gpu.batcher.dispatch(dq, uniforms, [...head, stats.binding(), t.dQ.binding(), ...dqTail], [Math.ceil(S / geometry.BR), H, B] as const);
  gpu.batcher.dispatch(
    dkv,
    uniforms,
    [...head, stats.binding(), t.dKCache.binding(), t.dVCache.binding()],
    [Math.ceil(S / geometry.BK), G, B],
  );
  gpu.release(stats);
}

interface ResolvedKernels {
  /** The record the grids are computed from. */
  geometry: FlashGeometry;
  kernels: FlashKernels;
  /**
   * Override constants of forward, dq and dkv: the head size, and LANE_DIMS, how many of its dims
   * each of the TPR invocations of a flash row owns, or how many slots a row split across the
   * lanes kernels' 8 lanes takes (constant loop trip counts keep per-invocation arrays in registers).
   */
  lanes: { HEAD_DIM: number; LANE_DIMS: number };
}

/**
 * The variant a call runs: `options.variant`, else `flash` when a geometry is given, else the
 * policy's pick for this device. Refused, with the reason, when the variant cannot run `dims` or
 * when a geometry comes with `lanes`. attentionProbs resolves the same way, so its scores follow
 * the forward's.
 */
export function resolveAttentionVariant(ctx: GpuContext, dims: AttentionDims, options: AttentionForwardOptions): AttentionVariant {
  const facts = attentionDeviceFacts(ctx);
  const variant =
    options.variant ?? (options.geometry !== undefined ? 'flash' : chooseAttentionVariant(dims, ctx.features, ctx.limits, facts));
  if (!ATTENTION_VARIANTS.includes(variant))
    throw new Error(`attention: unknown variant "${String(variant)}" (known: ${ATTENTION_VARIANTS.join(', ')})`);
  if (variant === 'lanes') {
    if (options.geometry !== undefined) throw new Error('attention: a geometry applies to the flash variant only, not lanes');
    const why = lanesUnsupported(dims, ctx.features, facts, ctx.limits);
    if (why) throw new Error(why);
  }
  return variant;
}

/** The variant's kernels and geometry for `dims` on this device. */
function resolveKernels(gpu: Gpu, dims: TttAttentionDims, options: AttentionForwardOptions): ResolvedKernels {
  if (resolveAttentionVariant(gpu.ctx, dims, options) === 'lanes') {
    return { ...lanesFor(dims.headDim), lanes: { HEAD_DIM: dims.headDim, LANE_DIMS: Math.ceil(dims.headDim / LANES_SUBGROUP) } };
  }
  const geometry = resolveGeometry(options.geometry, dims, gpu.ctx.limits);
  return { geometry, kernels: kernelsFor(geometry), lanes: { HEAD_DIM: dims.headDim, LANE_DIMS: Math.ceil(dims.headDim / geometry.TPR) } };
}

/** Uniform block shared by every attention kernel (matches `Params` in the WGSL). */
function params(dims: TttAttentionDims, accumulate: boolean): Uint8Array {
  return new UniformWriter()
    .u32(dims.batch)
    .u32(dims.seq)
    .u32(dims.heads)
    .u32(dims.kvHeads)
    .u32(dims.step)
    .u32(accumulate ? 1 : 0)
    .f32(1 / Math.sqrt(dims.headDim))
    .u32(0)
    .finish();
}

function checkDims(dims: TttAttentionDims): void {
  for (const key of ['batch', 'seq', 'heads', 'kvHeads', 'headDim'] as const) {
    const v = dims[key];
    if (!Number.isInteger(v) || v < 1) throw new Error(`attention: ${key} must be a positive integer, got ${v}`);
  }
  if (!Number.isInteger(dims.step) || dims.step < 0) throw new Error(`attention: step must be a non-negative integer, got ${dims.step}`);
  if (dims.heads % dims.kvHeads !== 0) {
    throw new Error(`attention: heads ${dims.heads} must be a multiple of kvHeads ${dims.kvHeads} (grouped-query attention)`);
  }
}

function checkActivations(t: TttForwardTensors, dims: TttAttentionDims): void {
  const { batch: B, seq: S, heads: H, headDim: D } = dims;
  checkTensor(t.q, 'q', 'f32', B * S * H * D, '[B, S, nH, hd]');
  checkCache(t.kCache, 'k / kCache', dims);
  checkCache(t.vCache, 'v / vCache', dims);
  checkTensor(t.mask, 'mask', 'i32', B * S, '[B, S]');
  checkTensor(t.o, 'o', 'f32', B * S * H * D, '[B, S, nH, hd]');
  checkTensor(t.lse, 'lse', 'f32', B * H * S, '[B, nH, S]');
}

function checkTensor(t: Tensor, name: string, dtype: DType, numel: number, layout: string): void {
  if (t.dtype !== dtype) throw new Error(`attention: ${name} (${t.label}) must be ${dtype}, got ${t.dtype}`);
  if (t.numel !== numel) {
    throw new Error(`attention: ${name} (${t.label} ${fmtShape(t.shape)}) has ${t.numel} elements; layout ${layout} needs ${numel}`);
  }
  if (t.isChunked) throw new Error(`attention: ${name} (${t.label}) is split into ${t.parts.length} parts; attention needs one binding`);
}

/** A K/V cache (or its gradient): a whole number J ≥ step + 1 of [B, S, nKV, hd] slots. */
function checkCache(t: Tensor, name: string, dims: TttAttentionDims): void {
  const slot = dims.batch * dims.seq * dims.kvHeads * dims.headDim;
  if (t.dtype !== 'f32') throw new Error(`attention: ${name} (${t.label}) must be f32, got ${t.dtype}`);
  if (t.numel % slot !== 0 || t.numel / slot < dims.step + 1) {
    throw new Error(
      `attention: ${name} (${t.label} ${fmtShape(t.shape)}) has ${t.numel} elements; step ${dims.step} needs [J ≥ ${dims.step + 1}, B, S, nKV, hd] = a multiple of ${slot}, at least ${(dims.step + 1) * slot}`,
    );
  }
  if (t.isChunked) throw new Error(`attention: ${name} (${t.label}) is split into ${t.parts.length} parts; attention needs one binding`);
}
