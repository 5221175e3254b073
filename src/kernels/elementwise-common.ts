/**
 * Small helpers shared by the element-wise and normalisation kernel families (embedding, rmsnorm,
 * rope, swiglu, optim): argument checks that name the tensor at fault, and the 2-D folding of a
 * long 1-D launch (WebGPU caps each dispatch dimension, usually at 65535 workgroups).
 */
import type { Gpu } from '../gpu/gpu.ts';
import { fmtShape, type DType, type Tensor } from '../gpu/tensor.ts';

/**
 * Invocations per workgroup of the one-invocation-per-element kernels (copy/strided,
 * embedding/{gather,links,scatter}, rope/table, swiglu/{forward,backward}, optim/{scale,adamw}).
 * Each shader receives it as the WGSL constant WG (ELEMENTWISE_CONSTANTS); `elementGrid` sizes
 * their grids with it.
 */
export const ELEMENTWISE_WG = 256;

/** The WGSL constants of an element-wise shader (see shaderSource). */
export const ELEMENTWISE_CONSTANTS = { WG: ELEMENTWISE_WG } as const;

/** The folded grid of an element-wise kernel launching one invocation per each of `elements`. */
export function elementGrid(gpu: Gpu, elements: number): [number, number] {
  return linearGrid(gpu, Math.ceil(elements / ELEMENTWISE_WG));
}

/**
 * Fold `workgroups` linear workgroups into an [x, y] grid within the per-dimension limit. Shaders
 * recover the linear index as `wg.y * num_workgroups.x + wg.x` and skip indices past the end
 * (the last row of the grid may overshoot by up to x - 1 workgroups).
 */
export function linearGrid(gpu: Gpu, workgroups: number): [number, number] {
  const max = gpu.ctx.limits.maxComputeWorkgroupsPerDimension ?? 65535;
  return foldGrid(workgroups, max);
}

/** Pure form of `linearGrid`, for tests. */
export function foldGrid(workgroups: number, maxPerDim: number): [number, number] {
  if (workgroups <= maxPerDim) return [workgroups, 1];
  const y = Math.ceil(workgroups / maxPerDim);
  if (y > maxPerDim) throw new Error(`launch of ${workgroups} workgroups does not fit a ${maxPerDim} x ${maxPerDim} grid`);
  return [Math.ceil(workgroups / y), y];
}

/** Throws unless `value` is an integer ≥ `min`; `what` names it (e.g. `rmsnorm: hidden`). */
export function checkInt(what: string, value: number, min = 1): void {
  if (!Number.isInteger(value) || value < min) throw new Error(`${what} must be an integer ≥ ${min}, got ${value}`);
}

/** Throws unless `value` is a finite number. */
export function checkFinite(what: string, value: number): void {
  if (!Number.isFinite(value)) throw new Error(`${what} must be a finite number, got ${value}`);
}

/**
 * Check one tensor argument: its dtype, and that it holds at least `minElements` elements (kernels
 * address it as a flat array, so a larger tensor is fine). `op` and `name` go into the message.
 */
export function checkTensor(op: string, name: string, t: Tensor, dtype: DType, minElements: number): void {
  if (t.dtype !== dtype) throw new Error(`${op}: ${name} (${t.label} ${fmtShape(t.shape)}) must be ${dtype}, got ${t.dtype}`);
  if (t.numel < minElements) {
    throw new Error(`${op}: ${name} (${t.label} ${fmtShape(t.shape)}) has ${t.numel} elements, needs at least ${minElements}`);
  }
}

/** Like checkTensor, and also require one part (row-wise kernels bind the whole tensor at once). */
export function checkSinglePart(op: string, name: string, t: Tensor, dtype: DType, minElements: number): void {
  checkTensor(op, name, t, dtype, minElements);
  if (t.isChunked) {
    throw new Error(
      `${op}: ${name} (${t.label} ${fmtShape(t.shape)}) is split into ${t.parts.length} parts; this kernel needs a single-binding tensor`,
    );
  }
}

/** Elements a row-strided operand must hold: rows - 1 full strides plus one row of `width`. */
export function stridedExtent(rows: number, width: number, stride: number): number {
  return rows === 0 ? 0 : (rows - 1) * stride + width;
}

/** Throws when a stride is smaller than the row it must hold. */
export function checkStride(op: string, name: string, stride: number, width: number): void {
  checkInt(`${op}: ${name}`, stride, width);
}

/** Whether any part of `a` lies in a GPU buffer holding a part of `b`. */
export function sharesBuffer(a: Tensor, b: Tensor): boolean {
  return a.parts.some((p) => b.parts.some((q) => q.buffer === p.buffer));
}

/**
 * The first written operand (by position in `operands`, the indices in `written`) that shares a GPU
 * buffer with any other operand, as a reason naming both, or undefined. By position, not by object: one
 * tensor passed twice (dx = x for an update in place) is a shared buffer too.
 */
export function writtenAlias(operands: readonly [string, Tensor][], written: readonly number[]): string | undefined {
  for (const i of written) {
    const [name, wt] = operands[i]!;
    for (const [j, [other, t]] of operands.entries()) {
      if (j !== i && sharesBuffer(wt, t)) return `${name} (${wt.label}) shares a GPU buffer with ${other} (${t.label})`;
    }
  }
  return undefined;
}

/** Throws when two distinct tensors share a GPU buffer that one of them would write. */
export function checkNoAlias(op: string, written: Tensor, others: readonly [string, Tensor][], writtenName: string): void {
  for (const [name, t] of others) {
    if (sharesBuffer(written, t)) {
      throw new Error(
        `${op}: ${writtenName} (${written.label}) shares a GPU buffer with ${name} (${t.label}); WebGPU forbids binding a written buffer twice in one dispatch`,
      );
    }
  }
}
