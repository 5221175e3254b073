/**
 * Matrix multiply: C = alpha · op(A) · op(B) + beta · C, batched, with transposes.
 *
 * Variants (shaders/matmul/*.wgsl), all with the same contract and the same f32 accuracy except
 * `tiled-f16` (tile and register-block sizes: MATMUL_GEOMETRY below):
 *   naive     — one output per invocation; the baseline.
 *   tiled     — register blocks per invocation, K slabs staged in workgroup memory; the GPU default.
 *   blocked   — large register blocks, no workgroup memory and no barriers; the no-feature variant
 *               for CPU adapters (llvmpipe / SwiftShader).
 *   subgroup  — one subgroup per workgroup, A shared across lanes by subgroupBroadcast; the
 *               fastest on CPU adapters that expose `subgroups` (needs subgroups at least as wide
 *               as the workgroup).
 *   tiled-f16 — `tiled` with operands rounded to f16 in workgroup memory, f32 accumulation
 *               (`shader-f16`); about 1e-3 relative error, so only used on request.
 * Tile and workgroup sizes are MATMUL_GEOMETRY's, passed to each shader as WGSL constants.
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

/**
 * Launch geometry of one variant: a workgroup of WG_X x WG_Y invocations, each computing a
 * THREAD_M x THREAD_N register block of C, so one workgroup computes a TILE_M x TILE_N tile
 * (TILE_M = WG_Y · THREAD_M, TILE_N = WG_X · THREAD_N) and the grid is
 * ceil(N / TILE_N) x ceil(M / TILE_M) x batch. The shader receives every field as a WGSL constant
 * (shaderSource), so this record is the only place the numbers live.
 */
export type MatmulGeometry = Readonly<Record<'WG_X' | 'WG_Y' | 'THREAD_M' | 'THREAD_N' | 'TILE_M' | 'TILE_N', number>>;

function geometry(wgX: number, wgY: number, threadM: number, threadN: number): MatmulGeometry {
  return { WG_X: wgX, WG_Y: wgY, THREAD_M: threadM, THREAD_N: threadN, TILE_M: wgY * threadM, TILE_N: wgX * threadN };
}

export const MATMUL_GEOMETRY: Readonly<Record<MatmulVariant, MatmulGeometry>> = {
  naive: geometry(16, 16, 1, 1),
  // 64 x 64 tiles from 16 x 16 invocations with 4 x 4 blocks; K slabs staged in workgroup memory.
  tiled: geometry(16, 16, 4, 4),
  // 128 x 128 tiles from 8 x 8 invocations with 16 x 16 blocks (32 loads per k for 256 fmas):
  // measured 1.05-1.8x faster than 8 x 8 blocks (64 x 64 tiles) on llvmpipe.
  blocked: geometry(8, 8, 16, 16),
  // One 8-lane subgroup per workgroup; each lane owns 32 rows x 4 columns (a vec4 per row), so a
  // workgroup computes 32 x 32. Measured best among 8..64 rows x 8..64 columns on llvmpipe. The
  // shader's rank-1 update is unrolled for exactly this shape and const_asserts it.
  subgroup: geometry(8, 1, 32, 4),
  'tiled-f16': geometry(16, 16, 4, 4),
};

const matmulKernel = (variant: MatmulVariant, shader: string, requires?: readonly string[]): KernelDef => ({
  name: `matmul/${shader}`,
  source: shaderSource(`matmul/${shader}`, MATMUL_GEOMETRY[variant]),
  bindings: BINDINGS,
  ...(requires ? { requires } : {}),
});

export const MATMUL_KERNELS: Readonly<Record<MatmulVariant, KernelDef>> = {
  naive: matmulKernel('naive', 'naive'),
  tiled: matmulKernel('tiled', 'tiled'),
  blocked: matmulKernel('blocked', 'blocked'),
  subgroup: matmulKernel('subgroup', 'subgroup', ['subgroups']),
  'tiled-f16': matmulKernel('tiled-f16', 'tiled_f16', ['shader-f16']),
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
  // The shader assumes its whole workgroup is one subgroup with lanes 0..WG_X-1.
  const lanes = MATMUL_GEOMETRY.subgroup.WG_X;
  if (variant === 'subgroup' && !((facts.subgroupMinSize ?? 0) >= lanes)) {
    return `matmul variant subgroup needs subgroups of at least ${lanes} invocations (device minimum: ${facts.subgroupMinSize ?? 'unknown'})`;
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
  const { TILE_M, TILE_N } = MATMUL_GEOMETRY[variant];
  gpu.batcher.dispatch(kernel, uniforms, [a.binding(), b.binding(), c.binding()], [Math.ceil(N / TILE_N), Math.ceil(M / TILE_M), batch]);
}
