/**
 * Matrix multiply: C = alpha · op(A) · op(B) + beta · C, batched, with transposes.
 *
 * Variants (shaders/matmul/*.wgsl), all with the same contract and the same f32 accuracy except
 * `tiled-f16` (tile and register-block sizes: MATMUL_GEOMETRY below):
 *   naive     — one output per invocation; the baseline.
 *   tiled     — register blocks per invocation, K slabs staged in workgroup memory; the GPU default.
 *   blocked   — large register blocks, no workgroup memory and no barriers; the no-feature variant
 *               for CPU adapters (llvmpipe / SwiftShader).
 *   subgroup  — one subgroup per workgroup, A shared across lanes by subgroupBroadcast; for CPU
 *               adapters that expose `subgroups` (needs subgroups at least as wide as the workgroup).
 *   subgroup-vec4 — `subgroup` reading every operand as vec4 (four elements per load, which on a
 *               CPU adapter costs about what one does); the fastest there, for shapes whose
 *               contiguous axes are multiples of 4 (matmulShapeUnfit says which).
 *   tiled-f16 — `tiled` with operands rounded to f16 in workgroup memory, f32 accumulation
 *               (`shader-f16`); about 1e-3 relative error, so only used on request.
 *   gemv      — the single-row product (M = 1) against a transposed weight (TRANS_B): lanes split
 *               K, a tree in workgroup memory sums them (not in MATMUL_VARIANTS, which lists the
 *               general variants: it takes only M = 1).
 *   gemv-vec4 — gemv reading the row and the weights as vec4s (four f32 or eight f16 weights per
 *               load), for K a multiple of 4 (f32) or 8 (f16 weights); M = 1 only, like gemv.
 *   gemv-subgroup — gemv-vec4 in one 8-lane subgroup per workgroup, the lanes' sums added by subgroup
 *               shuffles instead of a barrier tree (`subgroups`, as wide as the workgroup); CPU adapters.
 * Weights stored as f16 (a B tensor of dtype 'f16', the frozen target's weights): every variant but
 * tiled-f16 also exists as a *-f16w kernel (the same shader text compiled with B_F16 = 1, or for
 * subgroup-vec4 the shared body include/matmul-subgroup-vec4 with an f16 load), which reads B as packed f16 through the core builtin
 * unpack2x16float (so it runs on every adapter, `shader-f16` or not) and computes in f32: the result
 * is the f32 variant's on the f16-rounded weights.
 * Tile and workgroup sizes are MATMUL_GEOMETRY's, passed to each shader as WGSL constants.
 * `chooseMatmulVariant` is the policy, a pure function of shape, features and device facts.
 */
import type { GpuContext } from '../gpu/context.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { shaderSource } from './shader-source.ts';

export type MatmulVariant =
  'naive' | 'tiled' | 'blocked' | 'subgroup' | 'subgroup-vec4' | 'tiled-f16' | 'gemv' | 'gemv-vec4' | 'gemv-subgroup';

/** Storage type of B: f32, or f16 (f16 storage, f32 arithmetic). A and C are always f32. */
export type MatmulWeightDType = 'f32' | 'f16';

/** Every general variant (any M), baseline first (the order tests and benchmarks use). gemv is apart: M = 1 only. */
export const MATMUL_VARIANTS: readonly MatmulVariant[] = ['naive', 'tiled', 'blocked', 'subgroup', 'subgroup-vec4', 'tiled-f16'];

/** The variants that also read an f16 B (every one but tiled-f16, whose point is f16 operands in workgroup memory). */
export const MATMUL_F16W_VARIANTS = [
  'naive',
  'tiled',
  'blocked',
  'subgroup',
  'subgroup-vec4',
  'gemv',
  'gemv-vec4',
  'gemv-subgroup',
] as const satisfies readonly MatmulVariant[];
export type MatmulF16wVariant = (typeof MATMUL_F16W_VARIANTS)[number];

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
  // The same 8 lanes x (32 rows, 4 columns); its unrolled broadcasts const_assert it too.
  'subgroup-vec4': geometry(8, 1, 32, 4),
  'tiled-f16': geometry(16, 16, 4, 4),
  // One row: WG_X lanes split K (in pairs of k), each lane covering THREAD_N = TILE_N weight rows
  // so an A pair is loaded once for all of them; WG_Y, THREAD_M and TILE_M are 1 by definition.
  gemv: { WG_X: 64, WG_Y: 1, THREAD_M: 1, THREAD_N: 4, TILE_M: 1, TILE_N: 4 },
  // Each lane loads four f32 (or eight f16) weights of a row at a time; 32 lanes x 8 rows measured
  // best of 16..64 lanes x 4..16 rows on llvmpipe (bench/RESULTS.md, "Matmuls near the ceiling").
  'gemv-vec4': { WG_X: 32, WG_Y: 1, THREAD_M: 1, THREAD_N: 8, TILE_M: 1, TILE_N: 8 },
  // One 8-lane subgroup (llvmpipe's SIMD width) per workgroup, 4 rows each: of 1, 2, 4, 8 and 32 rows
  // on llvmpipe, 4 and 8 were best at 1 x 4096 x 4096, 8192 x 2048 and 2048 x 2048 (within the
  // machine's spread of each other with f32 weights), 4 with f16 weights by 1.1-1.3x.
  'gemv-subgroup': { WG_X: 8, WG_Y: 1, THREAD_M: 1, THREAD_N: 4, TILE_M: 1, TILE_N: 4 },
};

const matmulKernel = (variant: MatmulVariant, shader: string, requires?: readonly string[], bF16 = false): KernelDef => ({
  name: `matmul/${shader}`,
  source: shaderSource(`matmul/${shader}`, { ...MATMUL_GEOMETRY[variant], B_F16: bF16 ? 1 : 0 }),
  bindings: BINDINGS,
  ...(requires ? { requires } : {}),
});

export const MATMUL_KERNELS: Readonly<Record<MatmulVariant, KernelDef>> = {
  naive: matmulKernel('naive', 'naive'),
  tiled: matmulKernel('tiled', 'tiled'),
  blocked: matmulKernel('blocked', 'blocked'),
  subgroup: matmulKernel('subgroup', 'subgroup', ['subgroups']),
  'subgroup-vec4': matmulKernel('subgroup-vec4', 'subgroup-vec4', ['subgroups']),
  'tiled-f16': matmulKernel('tiled-f16', 'tiled-f16', ['shader-f16']),
  gemv: matmulKernel('gemv', 'gemv'),
  'gemv-vec4': matmulKernel('gemv-vec4', 'gemv-vec4'),
  'gemv-subgroup': matmulKernel('gemv-subgroup', 'gemv-subgroup', ['subgroups']),
};

/** The f16-weight kernels: the geometry of the f32 variant; its shader text with B_F16 = 1, except subgroup-vec4-f16w (its own B load around the shared body). */
export const MATMUL_F16W_KERNELS: Readonly<Record<MatmulF16wVariant, KernelDef>> = {
  naive: matmulKernel('naive', 'naive-f16w', undefined, true),
  tiled: matmulKernel('tiled', 'tiled-f16w', undefined, true),
  blocked: matmulKernel('blocked', 'blocked-f16w', undefined, true),
  subgroup: matmulKernel('subgroup', 'subgroup-f16w', ['subgroups'], true),
  'subgroup-vec4': matmulKernel('subgroup-vec4', 'subgroup-vec4-f16w', ['subgroups'], true),
  gemv: matmulKernel('gemv', 'gemv-f16w', undefined, true),
  'gemv-vec4': matmulKernel('gemv-vec4', 'gemv-vec4-f16w', undefined, true),
  'gemv-subgroup': matmulKernel('gemv-subgroup', 'gemv-subgroup-f16w', ['subgroups'], true),
};

/** The single-row variants (M = 1 against a transposed weight; checkGemv holds them to it). */
const GEMV_VARIANTS: ReadonlySet<MatmulVariant> = new Set(['gemv', 'gemv-vec4', 'gemv-subgroup']);

/** The variants whose workgroup must be one subgroup with lanes 0..WG_X-1. */
const ONE_SUBGROUP_VARIANTS: ReadonlySet<MatmulVariant> = new Set(['subgroup', 'subgroup-vec4', 'gemv-subgroup']);

const isF16wVariant = (v: MatmulVariant): v is MatmulF16wVariant => (MATMUL_F16W_VARIANTS as readonly MatmulVariant[]).includes(v);

/** The kernel of `variant` for a B of `bDType`, or why there is none. */
export function matmulKernelFor(variant: MatmulVariant, bDType: MatmulWeightDType): KernelDef | string {
  if (bDType === 'f32') return MATMUL_KERNELS[variant];
  return isF16wVariant(variant)
    ? MATMUL_F16W_KERNELS[variant]
    : `matmul variant ${variant} has no f16-weight version (f16 B works with ${MATMUL_F16W_VARIANTS.join(', ')})`;
}

/** Relative error (‖C − C_ref‖₂ / ‖C_ref‖₂) a variant is held to against the float64 reference. */
export const MATMUL_TOLERANCE: Readonly<Record<MatmulVariant, number>> = {
  naive: 1e-5,
  tiled: 1e-5,
  blocked: 1e-5,
  subgroup: 1e-5,
  'subgroup-vec4': 1e-5,
  'tiled-f16': 2e-3,
  gemv: 1e-5,
  'gemv-vec4': 1e-5,
  'gemv-subgroup': 1e-5,
};

export interface MatmulShape {
  M: number;
  N: number;
  K: number;
  batch?: number;
  /** A stored [K, M]; only subgroup-vec4's fit depends on it. Default false. */
  transA?: boolean;
  /** B stored [N, K] (a Linear weight); gemv's choice and subgroup-vec4's fit depend on it. Default false. */
  transB?: boolean;
  /** Elements between batch matrices (0 broadcasts); default the matrix sizes. Only subgroup-vec4's fit depends on them. */
  strides?: { a: number; b: number; c: number };
  /** B's storage type; default 'f32'. */
  bDType?: MatmulWeightDType;
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
export function matmulVariantUnsupported(
  variant: MatmulVariant,
  features: ReadonlySet<string>,
  facts: MatmulDeviceFacts,
  bDType: MatmulWeightDType = 'f32',
): string | undefined {
  const kernel = matmulKernelFor(variant, bDType);
  if (typeof kernel === 'string') return kernel;
  for (const feature of kernel.requires ?? []) {
    if (!features.has(feature)) return `matmul variant ${variant} needs the WebGPU feature "${feature}"`;
  }
  // The shader assumes its whole workgroup is one subgroup with lanes 0..WG_X-1.
  const lanes = MATMUL_GEOMETRY[variant].WG_X;
  if (ONE_SUBGROUP_VARIANTS.has(variant) && !((facts.subgroupMinSize ?? 0) >= lanes)) {
    return `matmul variant ${variant} needs subgroups of at least ${lanes} invocations (device minimum: ${facts.subgroupMinSize ?? 'unknown'})`;
  }
  return undefined;
}

/**
 * Why `variant` cannot compute `shape`, or undefined when it can. Only subgroup-vec4 has such limits:
 * it reads A, B and C as vec4s, so K, N and the batch strides must be multiples of 4, and M too when
 * A is transposed (its rows are then the contiguous axis).
 */
export function matmulShapeUnfit(variant: MatmulVariant, shape: MatmulShape): string | undefined {
  if (variant === 'gemv-vec4' || variant === 'gemv-subgroup') return gemvVec4Unfit(shape, variant);
  if (variant !== 'subgroup-vec4') return undefined;
  const { M, N, K } = shape;
  const s = shape.strides ?? { a: M * K, b: K * N, c: M * N };
  const batched = (shape.batch ?? 1) > 1;
  const dims: [string, number][] = [
    ['K', K],
    ['N', N],
  ];
  if (shape.transA) dims.push(['M (A transposed)', M]);
  if (batched) dims.push(['strideA', s.a], ['strideB', s.b], ['strideC', s.c]);
  const bad = dims.filter(([, v]) => v % 4 !== 0);
  return bad.length > 0
    ? `matmul variant subgroup-vec4 reads vec4s and needs multiples of 4: ${bad.map(([n, v]) => `${n}=${v}`).join(', ')}`
    : undefined;
}

/** The variants this device can run, baseline first. */
export function availableMatmulVariants(features: ReadonlySet<string>, facts: MatmulDeviceFacts = {}): MatmulVariant[] {
  return MATMUL_VARIANTS.filter((v) => matmulVariantUnsupported(v, features, facts) === undefined);
}

/** gemv-vec4's (and gemv-subgroup's) limits: every weight row and batch starts on a vec4 of words (K, strides multiples of 4, or 8 for f16 weights). */
function gemvVec4Unfit(shape: MatmulShape, variant: 'gemv-vec4' | 'gemv-subgroup' = 'gemv-vec4'): string | undefined {
  const kc = shape.bDType === 'f16' ? 8 : 4;
  const s = shape.strides ?? { a: shape.K, b: shape.K * shape.N, c: shape.N };
  const dims: [string, number, number][] = [['K', shape.K, kc]];
  if ((shape.batch ?? 1) > 1) dims.push(['strideA', s.a, 4], ['strideB', s.b, kc]);
  const bad = dims.filter(([, v, m]) => v % m !== 0);
  return bad.length > 0
    ? `matmul variant ${variant} reads ${kc} ${shape.bDType === 'f16' ? 'f16' : 'f32'} weights per load and needs ${bad.map(([n, v, m]) => `${n}=${v} a multiple of ${m}`).join(', ')}`
    : undefined;
}

/**
 * Pick the fastest f32-exact variant (never `tiled-f16`, which changes the numerics).
 * - CPU adapters (measured on llvmpipe, see bench/RESULTS.md "matmul"): `subgroup-vec4` when subgroups
 *   of >= 8 lanes exist and the shape fits it (matmulShapeUnfit; f32 or f16 B), else `subgroup`, except for
 *   single-row products (M = 1, a GEMV: 31 of its 32 tile rows would be wasted; naive wins there);
 *   otherwise `blocked`, except when M or N is below 16 (its
 *   128 x 128 tile would be mostly empty; naive wins there). Both avoid workgroup memory and
 *   barriers, which cost more than they save on a CPU.
 * - GPUs: naive for tiny outputs (fewer than 1024 elements), else tiled (workgroup-memory tiling
 *   is what GPUs are built for).
 * - f16 weights (bDType 'f16'), any adapter: gemv-vec4 for a single row against a transposed weight
 *   whose K is a multiple of 8 (gemv-subgroup instead on CPU adapters with 8-lane subgroups: no
 *   barriers), else gemv with even K (a decode step's projections; all measured faster than naive on
 *   llvmpipe, see `npm run bench -- --only gemv`), else the rule above, whose every pick has an f16-weight kernel.
 *   f32 weights keep the rule above even at M = 1: gemv sums in another order, and the f32 path
 *   stays bit for bit what it was.
 */
export function chooseMatmulVariant(
  shape: MatmulShape,
  features: ReadonlySet<string> = new Set(),
  facts: MatmulDeviceFacts = {},
): MatmulVariant {
  const { M, N } = shape;
  if (shape.bDType === 'f16' && M === 1 && shape.transB) {
    if (gemvVec4Unfit(shape) === undefined) {
      const oneSubgroup = facts.fallbackAdapter && matmulVariantUnsupported('gemv-subgroup', features, facts) === undefined;
      return oneSubgroup ? 'gemv-subgroup' : 'gemv-vec4';
    }
    if (shape.K % 2 === 0) return 'gemv';
  }
  if (facts.fallbackAdapter) {
    if (matmulVariantUnsupported('subgroup', features, facts) === undefined) {
      if (M === 1) return 'naive';
      return matmulShapeUnfit('subgroup-vec4', shape) === undefined ? 'subgroup-vec4' : 'subgroup';
    }
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

/** The shape the policy sees for a matmul call: shape and options with every default filled in. */
export function resolvedMatmulShape(shape: MatmulShape, options: MatmulOptions, bDType: MatmulWeightDType): Required<MatmulShape> {
  const { M, N, K } = shape;
  return {
    M,
    N,
    K,
    batch: options.batch ?? shape.batch ?? 1,
    transA: options.transA ?? false,
    transB: options.transB ?? false,
    bDType,
    strides: { a: options.strideA ?? M * K, b: options.strideB ?? K * N, c: options.strideC ?? M * N },
  };
}

/**
 * Encode C = alpha · op(A) · op(B) + beta · C into the batcher (no submit). Shapes come from
 * M, N, K; the tensors must be at least that big. Chunked (multi-part) tensors are not accepted here.
 */
export async function matmul(gpu: Gpu, a: Tensor, b: Tensor, c: Tensor, shape: MatmulShape, options: MatmulOptions = {}): Promise<void> {
  const { M, N, K } = shape;
  const bDType: MatmulWeightDType = b.dtype === 'f16' ? 'f16' : 'f32';
  const full = resolvedMatmulShape(shape, options, bDType);
  const { batch, transA, transB } = full;
  const { a: strideA, b: strideB, c: strideC } = full.strides;
  for (const [t, need, name] of [
    [a, strideA * (batch - 1) + M * K, 'A'],
    [b, strideB * (batch - 1) + K * N, 'B'],
    [c, strideC * (batch - 1) + M * N, 'C'],
  ] as const) {
    if (t.dtype !== 'f32' && !(name === 'B' && t.dtype === 'f16'))
      throw new Error(`matmul: ${name} (${t.label}) must be f32${name === 'B' ? ' or f16' : ''}, got ${t.dtype}`);
    if (t.numel < need)
      throw new Error(
        `matmul: ${name} (${t.label} ${fmtShape(t.shape)}) has ${t.numel} elements, M=${M} N=${N} K=${K} batch=${batch} needs ${need}`,
      );
  }
  const facts = matmulDeviceFacts(gpu.ctx);
  const variant = options.variant ?? chooseMatmulVariant(full, gpu.ctx.features, facts);
  const unsupported = matmulVariantUnsupported(variant, gpu.ctx.features, facts, bDType) ?? matmulShapeUnfit(variant, full);
  if (unsupported) throw new Error(`matmul: ${unsupported}`);
  if (GEMV_VARIANTS.has(variant)) checkGemv(b, { M, K, transB, strideB, batch, variant });
  const def = matmulKernelFor(variant, bDType) as KernelDef;
  const kernel = await gpu.pipelines.get(def, { TRANS_A: transA, TRANS_B: transB });
  const uniforms = new UniformWriter()
    .u32(M)
    .u32(N)
    .u32(K)
    .u32(strideA)
    .u32(strideB)
    .u32(strideC)
    .f32(options.alpha ?? 1)
    .f32(options.beta ?? 0)
    .finish();
  const { TILE_M, TILE_N } = MATMUL_GEOMETRY[variant];
  gpu.batcher.dispatch(kernel, uniforms, [a.binding(), b.binding(), c.binding()], [Math.ceil(N / TILE_N), Math.ceil(M / TILE_M), batch]);
}

/** gemv's own limits: one row, a transposed weight, and f16 rows that start on a word. */
function checkGemv(b: Tensor, s: { M: number; K: number; transB: boolean; strideB: number; batch: number; variant: MatmulVariant }): void {
  if (s.M !== 1) throw new Error(`matmul: variant ${s.variant} computes one row (M = 1), got M=${s.M}`);
  if (!s.transB) throw new Error(`matmul: variant ${s.variant} needs transB (B (${b.label}) stored [N, K])`);
  if (b.dtype === 'f16' && (s.K % 2 !== 0 || (s.batch > 1 && s.strideB % 2 !== 0))) {
    throw new Error(
      `matmul: variant gemv reads f16 B (${b.label}) in (k, k+1) pairs and needs an even K and batch stride, got K=${s.K} strideB=${s.strideB}`,
    );
  }
}
