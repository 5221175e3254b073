/**
 * RMSNorm (LlamaRMSNorm): y = w ⊙ x / sqrt(mean(x²) + eps) per row, statistics in f32.
 *
 * Kernels (shaders/rmsnorm/*.wgsl):
 *   forward     — one workgroup per row; writes y and saves 1/rms per row for the backward.
 *   backward_dx — one workgroup per row; dx from dy, x, w and the saved 1/rms.
 *   backward_dw — column blocks looping over rows: the deterministic row reduction for dw.
 * Rows may be padded (row strides ≥ hidden), e.g. a norm over a slice of a wider activation.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkFinite, checkInt, checkNoAlias, checkSinglePart, checkStride, linearGrid, stridedExtent } from './elementwise-common.ts';
import { shaderSource } from './shader-source.ts';

/** Columns per backward_dw workgroup (the shader's WG_X); the dw grid is ceil(hidden / this). */
const RMSNORM_DW_COLUMNS = 64;

export const RMSNORM_KERNELS = {
  forward: { name: 'rmsnorm/forward', source: shaderSource('rmsnorm/forward'), bindings: ['uniform', 'read', 'read', 'write', 'write'] },
  backwardDx: { name: 'rmsnorm/backward_dx', source: shaderSource('rmsnorm/backward_dx'), bindings: ['uniform', 'read', 'read', 'read', 'read', 'write'] },
  backwardDw: { name: 'rmsnorm/backward_dw', source: shaderSource('rmsnorm/backward_dw', { WG_X: RMSNORM_DW_COLUMNS }), bindings: ['uniform', 'read', 'read', 'read', 'write'] },
} as const satisfies Record<string, KernelDef>;

export interface RmsnormArgs {
  rows: number;
  hidden: number;
  eps: number;
  /** Elements between consecutive rows of x (and dx in the backward); default hidden. */
  strideX?: number;
  /** Elements between consecutive rows of y (and dy in the backward); default hidden. */
  strideY?: number;
}

function resolve(op: string, args: Omit<RmsnormArgs, 'eps'>): { rows: number; hidden: number; strideX: number; strideY: number } {
  checkInt(`${op}: rows`, args.rows, 0);
  checkInt(`${op}: hidden`, args.hidden);
  const strideX = args.strideX ?? args.hidden;
  const strideY = args.strideY ?? args.hidden;
  checkStride(op, 'strideX', strideX, args.hidden);
  checkStride(op, 'strideY', strideY, args.hidden);
  return { rows: args.rows, hidden: args.hidden, strideX, strideY };
}

/** Encode y = rmsnorm(x) · w and invRms[r] = 1/rms of row r (no submit). */
export async function rmsnormForward(gpu: Gpu, x: Tensor, w: Tensor, y: Tensor, invRms: Tensor, args: RmsnormArgs): Promise<void> {
  const op = 'rmsnormForward';
  const { rows, hidden, strideX, strideY } = resolve(op, args);
  checkFinite(`${op}: eps`, args.eps);
  if (args.eps < 0) throw new Error(`${op}: eps must be ≥ 0, got ${args.eps}`);
  checkSinglePart(op, 'x', x, 'f32', stridedExtent(rows, hidden, strideX));
  checkSinglePart(op, 'w', w, 'f32', hidden);
  checkSinglePart(op, 'y', y, 'f32', stridedExtent(rows, hidden, strideY));
  checkSinglePart(op, 'invRms', invRms, 'f32', rows);
  checkNoAlias(op, y, [['x', x], ['w', w], ['invRms', invRms]], 'y');
  checkNoAlias(op, invRms, [['x', x], ['w', w]], 'invRms');
  const kernel = await gpu.pipelines.get(RMSNORM_KERNELS.forward);
  const uniforms = new UniformWriter().u32(rows).u32(hidden).u32(strideX).u32(strideY).f32(args.eps).finish();
  gpu.batcher.dispatch(kernel, uniforms, [x.binding(), w.binding(), y.binding(), invRms.binding()], linearGrid(gpu, rows));
}

export interface RmsnormBackwardOptions {
  /** Add into dx instead of overwriting it. */
  accumulateDx?: boolean;
  /** Add into dw instead of overwriting it. */
  accumulateDw?: boolean;
}

/**
 * Encode dx and dw of y = rmsnorm(x) · w given dy and the invRms saved by the forward (no submit).
 * dx uses strideX, dy uses strideY. Pass `dw = undefined` when the weight is frozen.
 */
export async function rmsnormBackward(
  gpu: Gpu,
  x: Tensor,
  w: Tensor,
  invRms: Tensor,
  dy: Tensor,
  dx: Tensor,
  dw: Tensor | undefined,
  args: Omit<RmsnormArgs, 'eps'>,
  options: RmsnormBackwardOptions = {},
): Promise<void> {
  const op = 'rmsnormBackward';
  const { rows, hidden, strideX, strideY } = resolve(op, args);
  checkSinglePart(op, 'x', x, 'f32', stridedExtent(rows, hidden, strideX));
  checkSinglePart(op, 'w', w, 'f32', hidden);
  checkSinglePart(op, 'invRms', invRms, 'f32', rows);
  checkSinglePart(op, 'dy', dy, 'f32', stridedExtent(rows, hidden, strideY));
  checkSinglePart(op, 'dx', dx, 'f32', stridedExtent(rows, hidden, strideX));
  checkNoAlias(op, dx, [['x', x], ['w', w], ['invRms', invRms], ['dy', dy]], 'dx');
  if (dw) {
    checkSinglePart(op, 'dw', dw, 'f32', hidden);
    checkNoAlias(op, dw, [['x', x], ['dy', dy], ['invRms', invRms], ['dx', dx]], 'dw');
  }
  const dxKernel = await gpu.pipelines.get(RMSNORM_KERNELS.backwardDx, { ACCUMULATE: options.accumulateDx ?? false });
  const dxUniforms = new UniformWriter().u32(rows).u32(hidden).u32(strideX).u32(strideY).u32(strideX).finish();
  gpu.batcher.dispatch(dxKernel, dxUniforms, [x.binding(), w.binding(), dy.binding(), invRms.binding(), dx.binding()], linearGrid(gpu, rows));
  if (!dw) return;
  const dwKernel = await gpu.pipelines.get(RMSNORM_KERNELS.backwardDw, { ACCUMULATE: options.accumulateDw ?? false });
  const dwUniforms = new UniformWriter().u32(rows).u32(hidden).u32(strideX).u32(strideY).finish();
  gpu.batcher.dispatch(dwKernel, dwUniforms, [x.binding(), dy.binding(), invRms.binding(), dw.binding()], [Math.ceil(hidden / RMSNORM_DW_COLUMNS)]);
}
