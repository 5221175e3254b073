/**
 * The two RMSNorms that start an EAGLE3 TTT step, z = [input_layernorm(table[ids']) | hidden_norm(x)]
 * (model/eagle3/step-body.ts), as one dispatch each way (shaders/rmsnorm/pair-*.wgsl):
 *   - rmsnormPairForward: rmsnormGatherForward into columns [0, hidden) of z's rows and rmsnormForward
 *     into [hidden, 2·hidden), each saving its 1/rms, in any row layout, wherever the table is one binding;
 *   - rmsnormPairBackward: hidden_norm's dx and dw (rmsnormBackward's fused subgroup kernel) and
 *     input_layernorm's dw (rmsnormGatherBackwardDw), where `pairBackwardUnfit` finds nothing against it
 *     (on a CPU adapter with 8-lane subgroups, at a small draft's sizes, as the fused backward runs).
 * Each row and column runs the body of the kernels it joins on the same operands, so the results have
 * their bits (test/kernels/rmsnorm-pair.test.ts). One launch instead of two: on llvmpipe, at the
 * fixture's draft size, the forward took 0.68–0.77 and the backward 0.75–0.83 of the two dispatches'
 * device time; at the lab's, 0.78–0.93 and 0.89–1.11; the forward about the same at 4096 × 1024 and
 * larger (`npx tsx bench/run.ts --only rmsnorm`, bench/RESULTS.md).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { storageLimitUnfit } from '../gpu/pipeline-cache.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { canViewAt, elementView } from '../gpu/tensor-views.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkFinite, checkNoAlias, checkSinglePart, checkStride, foldGrid, stridedExtent } from './elementwise-common.ts';
import { RMSNORM_FUSE_MAX_ELEMENTS, RMSNORM_ROW_GEOMETRY } from './rmsnorm.ts';
import { checkGather, tableConstants, type GatherRows } from './rmsnorm-gather.ts';
import { chooseRowVariant, resolveRowVariant, rowDeviceFacts, rowLayoutGrid, type RowVariant } from './row-variant.ts';
import { shaderSource } from './shader-source.ts';

const FWD_BINDINGS = ['uniform', 'read', 'read', 'write', 'write', 'read', 'read', 'read', 'write'] as const;
const BWD_BINDINGS = ['uniform', 'read', 'read', 'read', 'read', 'write', 'write', 'read', 'read', 'read', 'read'] as const;

export const RMSNORM_PAIR_KERNELS = {
  forward: { name: 'rmsnorm/pair-forward', source: shaderSource('rmsnorm/pair-forward'), bindings: FWD_BINDINGS },
  forwardRows: {
    name: 'rmsnorm/pair-forward-rows',
    source: shaderSource('rmsnorm/pair-forward-rows', RMSNORM_ROW_GEOMETRY.rows),
    bindings: FWD_BINDINGS,
  },
  forwardSubgroup: {
    name: 'rmsnorm/pair-forward-subgroup',
    source: shaderSource('rmsnorm/pair-forward-subgroup', RMSNORM_ROW_GEOMETRY.subgroup),
    bindings: FWD_BINDINGS,
    requires: ['subgroups'],
  },
  backwardSubgroup: {
    name: 'rmsnorm/pair-backward-subgroup',
    source: shaderSource('rmsnorm/pair-backward-subgroup', RMSNORM_ROW_GEOMETRY.subgroup),
    bindings: BWD_BINDINGS,
    requires: ['subgroups'],
  },
} as const satisfies Record<string, KernelDef>;

const FORWARD_BY_VARIANT: Readonly<Record<RowVariant, KernelDef>> = {
  wide: RMSNORM_PAIR_KERNELS.forward,
  rows: RMSNORM_PAIR_KERNELS.forwardRows,
  subgroup: RMSNORM_PAIR_KERNELS.forwardSubgroup,
};

/** The two norms of rmsnormPairForward: the gathered one (input_layernorm) and the strided one (hidden_norm). */
export interface NormPairOperands {
  ids: Tensor;
  table: Tensor;
  wEmb: Tensor;
  /** The strided norm's x: rows of `hidden` at row stride `strideX`. */
  x: Tensor;
  wHidden: Tensor;
  /** Rows of strideY ≥ 2·hidden: the gathered norm into columns [0, hidden), the strided one into [hidden, 2·hidden). */
  y: Tensor;
  invRmsEmb: Tensor;
  invRmsHidden: Tensor;
}

/**
 * Encode, in one dispatch, y[:, :hidden] = rmsnorm(table[ids']) · wEmb with invRmsEmb, and
 * y[:, hidden:2·hidden] = rmsnorm(x) · wHidden with invRmsHidden (no submit): the bits of
 * rmsnormGatherForward and rmsnormForward (strideY, and strideX for x, default hidden) in the same layout.
 */
export async function rmsnormPairForward(
  gpu: Gpu,
  t: NormPairOperands,
  g: GatherRows & { eps: number; strideX?: number; strideY: number; variant?: RowVariant },
): Promise<void> {
  const op = 'rmsnormPairForward';
  checkGather(op, t.ids, t.table, g);
  const strideX = g.strideX ?? g.hidden;
  checkStride(op, 'strideX', strideX, g.hidden);
  checkStride(op, 'strideY', g.strideY, 2 * g.hidden);
  checkFinite(`${op}: eps`, g.eps);
  if (g.eps < 0) throw new Error(`${op}: eps must be ≥ 0, got ${g.eps}`);
  checkSinglePart(op, 'wEmb', t.wEmb, 'f32', g.hidden);
  checkSinglePart(op, 'wHidden', t.wHidden, 'f32', g.hidden);
  checkSinglePart(op, 'x', t.x, 'f32', stridedExtent(g.rows, g.hidden, strideX));
  checkSinglePart(op, 'y', t.y, 'f32', stridedExtent(g.rows, 2 * g.hidden, g.strideY));
  checkSinglePart(op, 'invRmsEmb', t.invRmsEmb, 'f32', g.rows);
  checkSinglePart(op, 'invRmsHidden', t.invRmsHidden, 'f32', g.rows);
  const inputs: [string, Tensor][] = [
    ['ids', t.ids],
    ['table', t.table],
    ['wEmb', t.wEmb],
    ['x', t.x],
    ['wHidden', t.wHidden],
  ];
  checkNoAlias(op, t.y, [...inputs, ['invRmsEmb', t.invRmsEmb], ['invRmsHidden', t.invRmsHidden]], 'y');
  checkNoAlias(op, t.invRmsEmb, [...inputs, ['invRmsHidden', t.invRmsHidden]], 'invRmsEmb');
  checkNoAlias(op, t.invRmsHidden, inputs, 'invRmsHidden');
  const variant = resolveRowVariant(op, 'rmsnorm', gpu.ctx, { width: g.hidden, rows: g.rows }, RMSNORM_ROW_GEOMETRY, g.variant);
  const kernel = await gpu.pipelines.get(FORWARD_BY_VARIANT[variant], tableConstants(t.table));
  const uniforms = new UniformWriter()
    .u32(g.rows)
    .u32(g.hidden)
    .u32(strideX)
    .u32(g.strideY)
    .f32(g.eps)
    .u32(g.seqLen)
    .u32(g.shift)
    .u32(g.vocab)
    .finish();
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [
      t.table.binding(),
      t.wEmb.binding(),
      t.y.binding(),
      t.invRmsEmb.binding(),
      t.ids.binding(),
      t.x.binding(),
      t.wHidden.binding(),
      t.invRmsHidden.binding(),
    ],
    rowLayoutGrid(gpu.ctx, 2 * g.rows, variant, RMSNORM_ROW_GEOMETRY),
  );
}

/** The gradients of rmsnormPairForward's two norms. */
export interface NormPairGradOperands {
  ids: Tensor;
  table: Tensor;
  /** hidden_norm's input and weight, and both norms' saved 1/rms. */
  x: Tensor;
  wHidden: Tensor;
  invRmsEmb: Tensor;
  invRmsHidden: Tensor;
  /** dL/dz: rows of strideDy ≥ 2·hidden, input_layernorm's dy in columns [0, hidden), hidden_norm's in [hidden, 2·hidden). */
  dz: Tensor;
  /** hidden_norm's dx, at x's row stride. */
  dx: Tensor;
  dwEmb: Tensor;
  dwHidden: Tensor;
}

/**
 * Why rmsnormPairBackward does not run for a step of `rows` × `hidden` with these weight gradients on
 * this device, or undefined where it does: it joins the fused subgroup backward (the `subgroup` row
 * layout, up to RMSNORM_FUSE_MAX_ELEMENTS, as rmsnormBackward picks it), binds hidden_norm's half of dz
 * from element `hidden` (on the binding alignment), binds 10 storage buffers in one stage, and writes
 * both weight gradients through one binding, so they must be views of one buffer (as the optimizer's
 * gradients are) within one binding's reach of each other.
 */
export function pairBackwardUnfit(gpu: Gpu, rows: number, hidden: number, grads: { dwEmb: Tensor; dwHidden: Tensor }): string | undefined {
  const variant = chooseRowVariant({ width: hidden, rows }, RMSNORM_ROW_GEOMETRY, gpu.ctx.features, rowDeviceFacts(gpu.ctx));
  if (variant !== 'subgroup') return `the row layout here is ${variant}, not subgroup`;
  if (rows * hidden > RMSNORM_FUSE_MAX_ELEMENTS) return `${rows} x ${hidden} is above RMSNORM_FUSE_MAX_ELEMENTS`;
  if (!canViewAt(gpu, hidden)) return `hidden_norm's half of dz (element ${hidden}) is off the binding alignment`;
  const unbindable = storageLimitUnfit(RMSNORM_PAIR_KERNELS.backwardSubgroup, gpu.ctx.limits);
  if (unbindable) return unbindable;
  const { dwEmb, dwHidden } = grads;
  if (dwEmb.parts.length !== 1 || dwHidden.parts.length !== 1) return 'dwEmb and dwHidden must each be one binding';
  const span = gradientSpan(dwEmb, dwHidden);
  if (!span) return `dwEmb (${dwEmb.label}) and dwHidden (${dwHidden.label}) are not views of one buffer`;
  const [a, b] = [dwEmb.part, dwHidden.part];
  if (a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength)
    return `dwEmb (${dwEmb.label}) and dwHidden (${dwHidden.label}) overlap`;
  if (span.binding.offset! % (gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256) !== 0)
    return 'the gradients start off the binding alignment';
  if (span.size > gpu.maxBindingBytes) return `dwEmb and dwHidden lie ${span.size} bytes apart, beyond one binding`;
  return undefined;
}

/** One binding over two single-part f32 tensors in the same buffer, and each one's first element in it. */
function gradientSpan(a: Tensor, b: Tensor): { binding: GPUBufferBinding; size: number; offsetA: number; offsetB: number } | undefined {
  if (a.part.buffer !== b.part.buffer) return undefined;
  const start = Math.min(a.part.byteOffset, b.part.byteOffset);
  const size = Math.max(a.part.byteOffset + a.part.byteLength, b.part.byteOffset + b.part.byteLength) - start;
  return {
    binding: { buffer: a.part.buffer, offset: start, size },
    size,
    offsetA: (a.part.byteOffset - start) / 4,
    offsetB: (b.part.byteOffset - start) / 4,
  };
}

/**
 * Encode, in one dispatch, hidden_norm's dx (+)= and dwHidden (+)= (rmsnormBackward) and input_layernorm's
 * dwEmb (+)= (rmsnormGatherBackwardDw) from dz (no submit). Refused, naming the reason, where
 * pairBackwardUnfit says it does not run.
 */
export async function rmsnormPairBackward(
  gpu: Gpu,
  t: NormPairGradOperands,
  g: GatherRows & { strideX?: number; strideDy: number },
  options: { accumulateDx?: boolean; accumulateDw?: boolean } = {},
): Promise<void> {
  const op = 'rmsnormPairBackward';
  checkGather(op, t.ids, t.table, g);
  const unfit = pairBackwardUnfit(gpu, g.rows, g.hidden, t);
  if (unfit) throw new Error(`${op}: ${unfit}`);
  const span = gradientSpan(t.dwEmb, t.dwHidden)!;
  const strideX = g.strideX ?? g.hidden;
  checkStride(op, 'strideX', strideX, g.hidden);
  checkStride(op, 'strideDy', g.strideDy, 2 * g.hidden);
  checkSinglePart(op, 'x', t.x, 'f32', stridedExtent(g.rows, g.hidden, strideX));
  checkSinglePart(op, 'dx', t.dx, 'f32', stridedExtent(g.rows, g.hidden, strideX));
  checkSinglePart(op, 'dz', t.dz, 'f32', stridedExtent(g.rows, 2 * g.hidden, g.strideDy));
  for (const [name, v] of [
    ['wHidden', t.wHidden],
    ['dwEmb', t.dwEmb],
    ['dwHidden', t.dwHidden],
  ] as const)
    checkSinglePart(op, name, v, 'f32', g.hidden);
  checkSinglePart(op, 'invRmsEmb', t.invRmsEmb, 'f32', g.rows);
  checkSinglePart(op, 'invRmsHidden', t.invRmsHidden, 'f32', g.rows);
  const inputs: [string, Tensor][] = [
    ['ids', t.ids],
    ['table', t.table],
    ['x', t.x],
    ['wHidden', t.wHidden],
    ['invRmsEmb', t.invRmsEmb],
    ['invRmsHidden', t.invRmsHidden],
    ['dz', t.dz],
  ];
  // dwEmb and dwHidden are one binding (gradientSpan; pairBackwardUnfit refused overlapping ones), so
  // they share their buffer with each other only.
  checkNoAlias(op, t.dx, [...inputs, ['dwEmb', t.dwEmb]], 'dx');
  checkNoAlias(op, t.dwEmb, inputs, 'dwEmb');
  const kernel = await gpu.pipelines.get(RMSNORM_PAIR_KERNELS.backwardSubgroup, {
    ACCUMULATE: options.accumulateDx ?? false,
    ACCUMULATE_DW: options.accumulateDw ?? false,
    ...tableConstants(t.table),
  });
  const dyHidden = elementView(gpu, t.dz, g.hidden, t.dz.numel - g.hidden, `${t.dz.label}[hidden_norm]`);
  const uniforms = new UniformWriter()
    .u32(g.rows)
    .u32(g.hidden)
    .u32(strideX)
    .u32(g.strideDy)
    .u32(strideX)
    .u32(g.seqLen)
    .u32(g.shift)
    .u32(g.vocab)
    .u32(span.offsetB)
    .u32(span.offsetA)
    .finish();
  const { LANES, ROWS } = RMSNORM_ROW_GEOMETRY.subgroup;
  const workgroups = Math.ceil(g.rows / ROWS) + 2 * Math.ceil(g.hidden / LANES);
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [
      t.x.binding(),
      t.wHidden.binding(),
      dyHidden.binding(),
      t.invRmsHidden.binding(),
      t.dx.binding(),
      span.binding,
      t.table.binding(),
      t.ids.binding(),
      t.dz.binding(),
      t.invRmsEmb.binding(),
    ],
    [...foldGrid(workgroups, gpu.ctx.limits.maxComputeWorkgroupsPerDimension ?? 65535), 1],
  );
}
