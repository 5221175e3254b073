/**
 * Matrix multiply: C = alpha · op(A) · op(B) + beta · C, batched, with transposes.
 *
 * Variants (shaders/matmul/*.wgsl):
 *   naive — one output per invocation; the baseline.
 *   tiled — 64 x 64 tile, 4 x 4 register block per invocation, K slabs in workgroup memory.
 * `chooseMatmulVariant` is the policy, a pure function of shape, features and limits.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { shaderSource } from './shader-source.ts';

export type MatmulVariant = 'naive' | 'tiled';

const BINDINGS = ['uniform', 'read', 'read', 'write'] as const;

export const MATMUL_KERNELS: Readonly<Record<MatmulVariant, KernelDef>> = {
  naive: { name: 'matmul/naive', source: shaderSource('matmul/naive'), bindings: BINDINGS },
  tiled: { name: 'matmul/tiled', source: shaderSource('matmul/tiled'), bindings: BINDINGS },
};

const TILE: Readonly<Record<MatmulVariant, number>> = { naive: 16, tiled: 64 };

export interface MatmulShape {
  M: number;
  N: number;
  K: number;
  batch?: number;
}

/**
 * Pick a variant. The register-blocked kernel wins whenever a 64 x 64 tile is reasonably full;
 * for tiny outputs (a few rows, e.g. decode-time GEMV-like shapes) the naive kernel wastes less.
 */
export function chooseMatmulVariant(shape: MatmulShape, _features: ReadonlySet<string> = new Set()): MatmulVariant {
  const { M, N } = shape;
  if (M * N < 64 * 64 / 4) return 'naive';
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
  const variant = options.variant ?? chooseMatmulVariant({ M, N, K, batch }, gpu.ctx.features);
  const kernel = await gpu.pipelines.get(MATMUL_KERNELS[variant], {
    TRANS_A: options.transA ?? false,
    TRANS_B: options.transB ?? false,
  });
  const uniforms = new UniformWriter()
    .u32(M).u32(N).u32(K)
    .u32(strideA).u32(strideB).u32(strideC)
    .f32(options.alpha ?? 1).f32(options.beta ?? 0)
    .finish();
  const tile = TILE[variant];
  gpu.batcher.dispatch(kernel, uniforms, [a.binding(), b.binding(), c.binding()], [Math.ceil(N / tile), Math.ceil(M / tile), batch]);
}
