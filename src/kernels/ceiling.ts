/**
 * The adapter's ceilings, measured by two kernels that do nothing else (bench/ceiling.ts):
 *   fmaPeak   — register-only vec4 fma chains (shaders/ceiling/fma.wgsl): the FMA rate;
 *   copyVec4  — a vec4 copy (shaders/ceiling/copy.wgsl): the memory bandwidth a kernel sees.
 * Every matmul, GEMV and step figure in bench/RESULTS.md is given as a fraction of them, which no
 * slower kernel can improve (a ratio to the best matmul could).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkInt, checkNoAlias, checkSinglePart } from './elementwise-common.ts';
import { shaderSource } from './shader-source.ts';

/**
 * WG invocations per workgroup; CHAINS independent vec4 recurrences per invocation: enough that a
 * CPU adapter's SIMD units and a GPU's pipelines both have independent fmas to overlap.
 */
export const CEILING_GEOMETRY = { WG: 64, CHAINS: 8 } as const;

export const CEILING_KERNELS = {
  fma: { name: 'ceiling/fma', source: shaderSource('ceiling/fma', CEILING_GEOMETRY), bindings: ['uniform', 'write'] },
  copy: { name: 'ceiling/copy', source: shaderSource('ceiling/copy', { WG: CEILING_GEOMETRY.WG }), bindings: ['uniform', 'read', 'write'] },
} as const satisfies Record<string, KernelDef>;

/** FLOPs of one fmaPeak launch (2 per lane per fma). */
export function fmaPeakFlops(invocations: number, iters: number): number {
  return invocations * iters * CEILING_GEOMETRY.CHAINS * 4 * 2;
}

/** Encodes `iters` fma steps of every chain in out.length invocations (a multiple of WG); out[g] gets invocation g's sum. */
export async function fmaPeak(gpu: Gpu, out: Tensor, iters: number, a = 0.999, b = 0.001): Promise<void> {
  const op = 'fmaPeak';
  const n = out.shape.reduce((x, y) => x * y, 1);
  checkInt(`${op}: iters`, iters, 0);
  checkInt(`${op}: invocations`, n, CEILING_GEOMETRY.WG);
  if (n % CEILING_GEOMETRY.WG !== 0)
    throw new Error(`${op}: invocations (out's ${n} elements) must be a multiple of ${CEILING_GEOMETRY.WG}`);
  if (!(Math.abs(a) < 1)) throw new Error(`${op}: |a| must be below 1 (the recurrence then stays bounded), got ${a}`);
  checkSinglePart(op, 'out', out, 'f32', n);
  const kernel = await gpu.pipelines.get(CEILING_KERNELS.fma);
  const uniforms = new UniformWriter().u32(iters).f32(a).f32(b).finish();
  gpu.batcher.dispatch(kernel, uniforms, [out.binding()], [n / CEILING_GEOMETRY.WG, 1]);
}

/** Encodes dst = src over `count` vec4 elements (both f32, 4 · count elements), with `workgroups` workgroups striding over it. */
export async function copyVec4(gpu: Gpu, src: Tensor, dst: Tensor, workgroups = 1024): Promise<void> {
  const op = 'copyVec4';
  const elements = src.shape.reduce((x, y) => x * y, 1);
  if (elements % 4 !== 0) throw new Error(`${op}: src has ${elements} elements, not a whole number of vec4s`);
  checkInt(`${op}: workgroups`, workgroups, 1);
  checkSinglePart(op, 'src', src, 'f32', elements);
  checkSinglePart(op, 'dst', dst, 'f32', elements);
  checkNoAlias(op, dst, [['src', src]], 'dst');
  const count = elements / 4;
  const groups = Math.min(workgroups, Math.max(1, Math.ceil(count / CEILING_GEOMETRY.WG)));
  const kernel = await gpu.pipelines.get(CEILING_KERNELS.copy);
  const uniforms = new UniformWriter()
    .u32(count)
    .u32(groups * CEILING_GEOMETRY.WG)
    .finish();
  gpu.batcher.dispatch(kernel, uniforms, [src.binding(), dst.binding()], [groups, 1]);
}
