/**
 * Matrix multiply: C = alpha · op(A) · op(B) + beta · C, batched, with transposes.
 *
 * Variants (shaders/matmul/*.wgsl), all with the same contract and the same f32 accuracy except
 * `tiled-f16`:
 *   naive     — one output per invocation; the baseline.
 *   tiled     — 64 x 64 tile, 4 x 4 register block per invocation, K slabs in workgroup memory;
 *               the GPU default.
 *   blocked   — 128 x 128 tile, 16 x 16 register block per invocation, no workgroup memory and no
 *               barriers; the no-feature variant for CPU adapters (llvmpipe / SwiftShader).
 *   subgroup  — 32 x 32 tile per 8-lane subgroup, A shared across lanes by subgroupBroadcast;
 *               the fastest on CPU adapters that expose `subgroups` (needs subgroups of >= 8).
 *   tiled-f16 — `tiled` with operands rounded to f16 in workgroup memory, f32 accumulation
 *               (`shader-f16`); about 1e-3 relative error, so only used on request.
 * `chooseMatmulVariant` is the policy, a pure function of shape, features and device facts.
 */
import type { GpuContext } from '../gpu/context.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { shaderSource } from './shader-source.ts';

export type MatmulVariant = 'naive' | 'tiled' | 'blocked' | 'subgroup' | 'tiled-f16';

/** Every variant, baseline first (the order tests and benchmarks use). */
export const MATMUL_VARIANTS: readonly MatmulVariant[] = ['naive', 'tiled', 'blocked', 'subgroup', 'tiled-f16'];

const BINDINGS = ['uniform', 'read', 'read', 'write'] as const;

export const MATMUL_KERNELS: Readonly<Record<MatmulVariant, KernelDef>> = {
  naive: { name: 'matmul/naive', source: shaderSource('matmul/naive'), bindings: BINDINGS },
  tiled: { name: 'matmul/tiled', source: shaderSource('matmul/tiled'), bindings: BINDINGS },
  blocked: { name: 'matmul/blocked', source: shaderSource('matmul/blocked'), bindings: BINDINGS },
  subgroup: { name: 'matmul/subgroup', source: shaderSource('matmul/subgroup'), bindings: BINDINGS, requires: ['subgroups'] },
  'tiled-f16': { name: 'matmul/tiled_f16', source: shaderSource('matmul/tiled_f16'), bindings: BINDINGS, requires: ['shader-f16'] },
};

/** Output tile [rows, columns] of one workgroup (the dispatch grid is ceil(N / cols) x ceil(M / rows)). */
const TILE: Readonly<Record<MatmulVariant, readonly [number, number]>> = {
  naive: [16, 16],
  tiled: [64, 64],
  blocked: [128, 128],
  subgroup: [32, 32],
  'tiled-f16': [64, 64],
};

/** Relative error (‖C − C_ref‖₂ / ‖C_ref‖₂) a variant is held to against the float64 reference. */
export const MATMUL_TOLERANCE: Readonly<Record<MatmulVariant, number>> = {
  naive: 1e-5,
  tiled: 1e-5,
  blocked: 1e-5,
  subgroup: 1e-5,
  'tiled-f16': 2e-3,
};

export interface MatmulShape {
  M: number;
  N: number;
  K: number;
  batch?: number;
}

/** What the policy knows about the device besides its features (from the adapter record). */
export interface MatmulDeviceFacts {
  /** A software (CPU) adapter: workgroups run on CPU threads, invocations are SIMD lanes. */
  fallbackAdapter?: boolean;
  subgroupMinSize?: number;
  subgroupMaxSize?: number;
}

export function matmulDeviceFacts(ctx: GpuContext): MatmulDeviceFacts {
  return {
    fallbackAdapter: ctx.record.isFallbackAdapter,
    subgroupMinSize: ctx.record.subgroupMinSize,
    subgroupMaxSize: ctx.record.subgroupMaxSize,
  };
}

/** Why `variant` cannot run on this device, or undefined when it can. */
export function matmulVariantUnsupported(variant: MatmulVariant, features: ReadonlySet<string>, facts: MatmulDeviceFacts): string | undefined {
  for (const feature of MATMUL_KERNELS[variant].requires ?? []) {
    if (!features.has(feature)) return `matmul variant ${variant} needs the WebGPU feature "${feature}"`;
  }
  if (variant === 'subgroup' && !((facts.subgroupMinSize ?? 0) >= 8)) {
    return `matmul variant subgroup needs subgroups of at least 8 invocations (device minimum: ${facts.subgroupMinSize ?? 'unknown'})`;
  }
  return undefined;
}

/** The variants this device can run, baseline first. */
export function availableMatmulVariants(features: ReadonlySet<string>, facts: MatmulDeviceFacts = {}): MatmulVariant[] {
  return MATMUL_VARIANTS.filter((v) => matmulVariantUnsupported(v, features, facts) === undefined);
}

/**
 * Pick the fastest f32-exact variant (never `tiled-f16`, which changes the numerics).
 * - CPU adapters (measured on llvmpipe, see bench/RESULTS.md "matmul"): `subgroup` when subgroups
 *   of >= 8 lanes exist, except for single-row products (M = 1, a GEMV: 31 of its 32 tile rows
 *   would be wasted; naive wins there); otherwise `blocked`, except when M or N is below 16 (its
 *   128 x 128 tile would be mostly empty; naive wins there). Both avoid workgroup memory and
 *   barriers, which cost more than they save on a CPU.
 * - GPUs: naive for tiny outputs (fewer than 1024 elements), else tiled (workgroup-memory tiling
 *   is what GPUs are built for).
 */
export function chooseMatmulVariant(shape: MatmulShape, features: ReadonlySet<string> = new Set(), facts: MatmulDeviceFacts = {}): MatmulVariant {
  const { M, N } = shape;
  if (facts.fallbackAdapter) {
    if (matmulVariantUnsupported('subgroup', features, facts) === undefined) return M === 1 ? 'naive' : 'subgroup';
    return Math.min(M, N) < 16 ? 'naive' : 'blocked';
  }
  if (M * N < 1024) return 'naive';
  return 'tiled';
}

export interface MatmulOptions {
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
  /** 0 overwrites C; 1 accumulates into C (gradient accumulation, residual adds). */
  beta?: number;
  batch?: number;
  /** Elements between consecutive batch matrices; 0 broadcasts one matrix to every batch. */
  strideA?: number;
  strideB?: number;
  strideC?: number;
  variant?: MatmulVariant;
}

/**
 * Encode C = alpha · op(A) · op(B) + beta · C into the batcher (no submit). Shapes come from
 * M, N, K; the tensors must be at least that big. Chunked (multi-part) tensors are not accepted here.
 */
export async function matmul(gpu: Gpu, a: Tensor, b: Tensor, c: Tensor, shape: MatmulShape, options: MatmulOptions = {}): Promise<void> {
  const { M, N, K } = shape;
  const batch = options.batch ?? shape.batch ?? 1;
  const strideA = options.strideA ?? M * K;
  const strideB = options.strideB ?? K * N;
  const strideC = options.strideC ?? M * N;
  for (const [t, need, name] of [
    [a, strideA * (batch - 1) + M * K, 'A'],
    [b, strideB * (batch - 1) + K * N, 'B'],
    [c, strideC * (batch - 1) + M * N, 'C'],
  ] as const) {
    if (t.dtype !== 'f32') throw new Error(`matmul: ${name} (${t.label}) must be f32, got ${t.dtype}`);
    if (t.numel < need) throw new Error(`matmul: ${name} (${t.label} ${fmtShape(t.shape)}) has ${t.numel} elements, M=${M} N=${N} K=${K} batch=${batch} needs ${need}`);
  }
  const facts = matmulDeviceFacts(gpu.ctx);
  const variant = options.variant ?? chooseMatmulVariant({ M, N, K, batch }, gpu.ctx.features, facts);
  const unsupported = matmulVariantUnsupported(variant, gpu.ctx.features, facts);
  if (unsupported) throw new Error(`matmul: ${unsupported}`);
  const kernel = await gpu.pipelines.get(MATMUL_KERNELS[variant], {
    TRANS_A: options.transA ?? false,
    TRANS_B: options.transB ?? false,
  });
  const uniforms = new UniformWriter()
    .u32(M).u32(N).u32(K)
    .u32(strideA).u32(strideB).u32(strideC)
    .f32(options.alpha ?? 1).f32(options.beta ?? 0)
    .finish();
  const [tileM, tileN] = TILE[variant];
  gpu.batcher.dispatch(kernel, uniforms, [a.binding(), b.binding(), c.binding()], [Math.ceil(N / tileN), Math.ceil(M / tileM), batch]);
}
