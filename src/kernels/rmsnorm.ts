/**
 * RMSNorm (LlamaRMSNorm): y = w ⊙ x / sqrt(mean(x²) + eps) per row, statistics in f32.
 *
 * Kernels (shaders/rmsnorm/*.wgsl):
 *   forward     — writes y and saves 1/rms per row for the backward.
 *   backward-dx — dx from dy, x, w and the saved 1/rms.
 *   backward-dw — column blocks looping over rows: the deterministic row reduction for dw.
 * forward and backward-dx come in the row layouts of src/kernels/row-variant.ts: `wide` (the
 * original 256-lane workgroup per row, forward.wgsl / backward-dx.wgsl), `rows` (*-rows.wgsl) and
 * `subgroup` (*-subgroup.wgsl), sized by RMSNORM_ROW_GEOMETRY; with the sized layouts dw runs as
 * backward-dw-columns (one lane per column, no barrier). chooseRowVariant picks; `variant` overrides.
 * In the `subgroup` layout, up to RMSNORM_FUSE_MAX_ELEMENTS, dx and dw run as one dispatch
 * (backward-subgroup-fused: the same row and column bodies in disjoint workgroups, the same bits);
 * `fuse: false` runs them as two.
 * Rows may be padded (row strides ≥ hidden), e.g. a norm over a slice of a wider activation.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkFinite, checkInt, checkNoAlias, checkSinglePart, checkStride, foldGrid, stridedExtent } from './elementwise-common.ts';
import { checkRowGeometries, resolveRowVariant, rowLayoutGrid, type RowGeometries, type RowVariant } from './row-variant.ts';
import { shaderSource } from './shader-source.ts';

/** Columns per backward-dw workgroup (the shader's WG_X); the dw grid is ceil(hidden / this). */
const RMSNORM_DW_COLUMNS = 64;

/**
 * Lanes per backward-dw-columns workgroup (its WG_X): one CPU SIMD vector on llvmpipe, so H = 128
 * still makes 16 workgroups to spread over threads.
 */
export const RMSNORM_DW_COLUMNS_LANES = 8;

/**
 * The sized row layouts (LANES lanes per row, ROWS rows per workgroup). LANES 8 is the subgroup
 * width of llvmpipe (one AVX vector); ROWS rows share a workgroup to spread its launch cost (not tuned further;
 * bench/row-variants.ts times the variants, bench/RESULTS.md "Row kernels" has the numbers).
 */
export const RMSNORM_ROW_GEOMETRY: RowGeometries = checkRowGeometries('rmsnorm', {
  rows: { LANES: 8, ROWS: 8 },
  subgroup: { LANES: 8, ROWS: 4 },
});

/**
 * The largest rows × hidden whose backward runs fused (one dispatch for dx and dw). Below it a launch
 * costs more than the work: at 80 × 64 and 224 × 128 (the fixture's and the lab's draft norms) the
 * fused dispatch took 0.50–0.57 of the two's time; at 4096 × 1024 and 2048 × 4096 it took 1.1–1.4×
 * their time (`npx tsx bench/run.ts --only rmsnorm`, bench/RESULTS.md), so large norms stay unfused.
 */
export const RMSNORM_FUSE_MAX_ELEMENTS = 65536;

const FWD_BINDINGS = ['uniform', 'read', 'read', 'write', 'write'] as const;
const DX_BINDINGS = ['uniform', 'read', 'read', 'read', 'read', 'write'] as const;
const DW_BINDINGS = ['uniform', 'read', 'read', 'read', 'write'] as const;
const SUBGROUPS = ['subgroups'] as const;

export const RMSNORM_KERNELS = {
  forward: { name: 'rmsnorm/forward', source: shaderSource('rmsnorm/forward'), bindings: FWD_BINDINGS },
  backwardDx: { name: 'rmsnorm/backward-dx', source: shaderSource('rmsnorm/backward-dx'), bindings: DX_BINDINGS },
  backwardDw: {
    name: 'rmsnorm/backward-dw',
    source: shaderSource('rmsnorm/backward-dw', { WG_X: RMSNORM_DW_COLUMNS }),
    bindings: DW_BINDINGS,
  },
  forwardRows: {
    name: 'rmsnorm/forward-rows',
    source: shaderSource('rmsnorm/forward-rows', RMSNORM_ROW_GEOMETRY.rows),
    bindings: FWD_BINDINGS,
  },
  backwardDxRows: {
    name: 'rmsnorm/backward-dx-rows',
    source: shaderSource('rmsnorm/backward-dx-rows', RMSNORM_ROW_GEOMETRY.rows),
    bindings: DX_BINDINGS,
  },
  forwardSubgroup: {
    name: 'rmsnorm/forward-subgroup',
    source: shaderSource('rmsnorm/forward-subgroup', RMSNORM_ROW_GEOMETRY.subgroup),
    bindings: FWD_BINDINGS,
    requires: SUBGROUPS,
  },
  backwardDxSubgroup: {
    name: 'rmsnorm/backward-dx-subgroup',
    source: shaderSource('rmsnorm/backward-dx-subgroup', RMSNORM_ROW_GEOMETRY.subgroup),
    bindings: DX_BINDINGS,
    requires: SUBGROUPS,
  },
  backwardDwColumns: {
    name: 'rmsnorm/backward-dw-columns',
    source: shaderSource('rmsnorm/backward-dw-columns', { WG_X: RMSNORM_DW_COLUMNS_LANES }),
    bindings: DW_BINDINGS,
  },
  backwardSubgroupFused: {
    name: 'rmsnorm/backward-subgroup-fused',
    source: shaderSource('rmsnorm/backward-subgroup-fused', RMSNORM_ROW_GEOMETRY.subgroup),
    bindings: [...DX_BINDINGS, 'write'],
    requires: SUBGROUPS,
  },
} as const satisfies Record<string, KernelDef>;

const FORWARD_BY_VARIANT: Readonly<Record<RowVariant, KernelDef>> = {
  wide: RMSNORM_KERNELS.forward,
  rows: RMSNORM_KERNELS.forwardRows,
  subgroup: RMSNORM_KERNELS.forwardSubgroup,
};
const DX_BY_VARIANT: Readonly<Record<RowVariant, KernelDef>> = {
  wide: RMSNORM_KERNELS.backwardDx,
  rows: RMSNORM_KERNELS.backwardDxRows,
  subgroup: RMSNORM_KERNELS.backwardDxSubgroup,
};

export interface RmsnormArgs {
  rows: number;
  hidden: number;
  eps: number;
  /** Elements between consecutive rows of x (and dx in the backward); default hidden. */
  strideX?: number;
  /** Elements between consecutive rows of y (and dy in the backward); default hidden. */
  strideY?: number;
  /** Row layout (tests, benchmarks); default chooseRowVariant's choice for this device. */
  variant?: RowVariant;
}

/**
 * Forward only: the rows come in blocks of `rows` rows (several TTT steps' rows stacked), and each
 * block's 1/rms goes to invRms from a multiple of `stride` elements. A caller that binds each block's
 * on its own picks `stride` on a binding boundary (stride · 4 a multiple of the device's
 * minStorageBufferOffsetAlignment; step-heads-batched.ts). Default: one block, invRms [rows].
 */
export interface InvRmsBlocks {
  rows: number;
  stride: number;
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
export async function rmsnormForward(
  gpu: Gpu,
  x: Tensor,
  w: Tensor,
  y: Tensor,
  invRms: Tensor,
  args: RmsnormArgs & { invRmsBlocks?: InvRmsBlocks },
): Promise<void> {
  const op = 'rmsnormForward';
  const { rows, hidden, strideX, strideY } = resolve(op, args);
  checkFinite(`${op}: eps`, args.eps);
  if (args.eps < 0) throw new Error(`${op}: eps must be ≥ 0, got ${args.eps}`);
  checkSinglePart(op, 'x', x, 'f32', stridedExtent(rows, hidden, strideX));
  checkSinglePart(op, 'w', w, 'f32', hidden);
  checkSinglePart(op, 'y', y, 'f32', stridedExtent(rows, hidden, strideY));
  const blocks = args.invRmsBlocks ?? { rows: Math.max(rows, 1), stride: 0 };
  if (args.invRmsBlocks) {
    checkInt(`${op}: invRmsBlocks.rows`, blocks.rows);
    if (rows % blocks.rows !== 0) throw new Error(`${op}: rows ${rows} is not a whole number of invRmsBlocks.rows ${blocks.rows}`);
    checkStride(op, 'invRmsBlocks.stride', blocks.stride, blocks.rows);
  }
  checkSinglePart(op, 'invRms', invRms, 'f32', args.invRmsBlocks ? stridedExtent(rows / blocks.rows, blocks.rows, blocks.stride) : rows);
  checkNoAlias(
    op,
    y,
    [
      ['x', x],
      ['w', w],
      ['invRms', invRms],
    ],
    'y',
  );
  checkNoAlias(
    op,
    invRms,
    [
      ['x', x],
      ['w', w],
    ],
    'invRms',
  );
  const variant = resolveRowVariant(op, 'rmsnorm', gpu.ctx, { width: hidden, rows }, RMSNORM_ROW_GEOMETRY, args.variant);
  const kernel = await gpu.pipelines.get(FORWARD_BY_VARIANT[variant]);
  const uniforms = new UniformWriter()
    .u32(rows)
    .u32(hidden)
    .u32(strideX)
    .u32(strideY)
    .f32(args.eps)
    .u32(blocks.rows)
    .u32(blocks.stride)
    .finish();
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [x.binding(), w.binding(), y.binding(), invRms.binding()],
    rowLayoutGrid(gpu.ctx, rows, variant, RMSNORM_ROW_GEOMETRY),
  );
}

export interface RmsnormBackwardOptions {
  /** Add into dx instead of overwriting it. */
  accumulateDx?: boolean;
  /** Add into dw instead of overwriting it. */
  accumulateDw?: boolean;
  /**
   * In the `subgroup` layout, dx and dw in one dispatch: default where rows × hidden ≤
   * RMSNORM_FUSE_MAX_ELEMENTS; true or false forces it (tests, benchmarks).
   */
  fuse?: boolean;
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
  checkNoAlias(
    op,
    dx,
    [
      ['x', x],
      ['w', w],
      ['invRms', invRms],
      ['dy', dy],
    ],
    'dx',
  );
  if (dw) {
    checkSinglePart(op, 'dw', dw, 'f32', hidden);
    checkNoAlias(
      op,
      dw,
      [
        ['x', x],
        ['dy', dy],
        ['invRms', invRms],
        ['dx', dx],
      ],
      'dw',
    );
  }
  const variant = resolveRowVariant(op, 'rmsnorm', gpu.ctx, { width: hidden, rows }, RMSNORM_ROW_GEOMETRY, args.variant);
  const dxUniforms = new UniformWriter().u32(rows).u32(hidden).u32(strideX).u32(strideY).u32(strideX).finish();
  if (dw && variant === 'subgroup' && (options.fuse ?? rows * hidden <= RMSNORM_FUSE_MAX_ELEMENTS)) {
    const fused = await gpu.pipelines.get(RMSNORM_KERNELS.backwardSubgroupFused, {
      ACCUMULATE: options.accumulateDx ?? false,
      ACCUMULATE_DW: options.accumulateDw ?? false,
    });
    const workgroups = Math.ceil(rows / RMSNORM_ROW_GEOMETRY.subgroup.ROWS) + Math.ceil(hidden / RMSNORM_ROW_GEOMETRY.subgroup.LANES);
    gpu.batcher.dispatch(
      fused,
      dxUniforms,
      [x.binding(), w.binding(), dy.binding(), invRms.binding(), dx.binding(), dw.binding()],
      [...foldGrid(workgroups, gpu.ctx.limits.maxComputeWorkgroupsPerDimension ?? 65535), 1],
    );
    return;
  }
  const dxKernel = await gpu.pipelines.get(DX_BY_VARIANT[variant], { ACCUMULATE: options.accumulateDx ?? false });
  gpu.batcher.dispatch(
    dxKernel,
    dxUniforms,
    [x.binding(), w.binding(), dy.binding(), invRms.binding(), dx.binding()],
    rowLayoutGrid(gpu.ctx, rows, variant, RMSNORM_ROW_GEOMETRY),
  );
  if (!dw) return;
  const wide = variant === 'wide';
  const dwKernel = await gpu.pipelines.get(wide ? RMSNORM_KERNELS.backwardDw : RMSNORM_KERNELS.backwardDwColumns, {
    ACCUMULATE: options.accumulateDw ?? false,
  });
  const dwUniforms = new UniformWriter().u32(rows).u32(hidden).u32(strideX).u32(strideY).finish();
  const columns = wide ? RMSNORM_DW_COLUMNS : RMSNORM_DW_COLUMNS_LANES;
  gpu.batcher.dispatch(dwKernel, dwUniforms, [x.binding(), dy.binding(), invRms.binding(), dw.binding()], [Math.ceil(hidden / columns)]);
}
