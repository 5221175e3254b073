/**
 * RMSNorm of embedding rows gathered on the fly (shaders/rmsnorm/gather-*.wgsl): the EAGLE3 draft's
 * input_layernorm of a TTT step's embeddings, y = rmsnorm(table[ids']) · w, in one dispatch where
 * embedding/gather and rmsnorm/forward took two, and without the [rows, hidden] gathered tensor
 * (which the training step otherwise keeps for every TTT step until its backward). The backward is
 * the weight gradient only, from the rows gathered again: the table is frozen, so no dx.
 *
 * ids' are the ids shifted left by `shift` within rows of `seqLen`, zero-filled, and an id outside
 * [0, vocab) reads a zero row: exactly embedding/gather's rows (include/embedding-row.wgsl is shared),
 * so the results have the bits of embeddingForward followed by rmsnormForward / rmsnormBackward's dw
 * in the same row layout. The table must be one binding (one row part): `gathersFromTable` says
 * whether it is; otherwise gather with embeddingForward and normalise with rmsnormForward.
 * rmsnorm-pair.ts runs this norm together with the EAGLE3 step's hidden_norm; the step itself calls
 * rmsnormGatherBackwardDw only where that pair's backward does not run, and rmsnormGatherForward not at
 * all (it stays the one-norm kernel the pair is checked against, bit for bit).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { planTensorLayout, type DType, type Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkFinite, checkInt, checkNoAlias, checkSinglePart, checkStride, stridedExtent } from './elementwise-common.ts';
import { RMSNORM_DW_COLUMNS_LANES, RMSNORM_ROW_GEOMETRY } from './rmsnorm.ts';
import { resolveRowVariant, rowLayoutGrid, type RowVariant } from './row-variant.ts';
import { shaderSource } from './shader-source.ts';

const FWD_BINDINGS = ['uniform', 'read', 'read', 'write', 'write', 'read'] as const;

export const RMSNORM_GATHER_KERNELS = {
  forward: { name: 'rmsnorm/gather-forward', source: shaderSource('rmsnorm/gather-forward'), bindings: FWD_BINDINGS },
  forwardRows: {
    name: 'rmsnorm/gather-forward-rows',
    source: shaderSource('rmsnorm/gather-forward-rows', RMSNORM_ROW_GEOMETRY.rows),
    bindings: FWD_BINDINGS,
  },
  forwardSubgroup: {
    name: 'rmsnorm/gather-forward-subgroup',
    source: shaderSource('rmsnorm/gather-forward-subgroup', RMSNORM_ROW_GEOMETRY.subgroup),
    bindings: FWD_BINDINGS,
    requires: ['subgroups'],
  },
  backwardDw: {
    name: 'rmsnorm/gather-backward-dw',
    source: shaderSource('rmsnorm/gather-backward-dw', { WG_X: RMSNORM_DW_COLUMNS_LANES }),
    bindings: ['uniform', 'read', 'read', 'read', 'write', 'read'],
  },
} as const satisfies Record<string, KernelDef>;

const FORWARD_BY_VARIANT: Readonly<Record<RowVariant, KernelDef>> = {
  wide: RMSNORM_GATHER_KERNELS.forward,
  rows: RMSNORM_GATHER_KERNELS.forwardRows,
  subgroup: RMSNORM_GATHER_KERNELS.forwardSubgroup,
};

/** Which rows of the table a gather reads (embedding/gather's shifted ids). */
export interface GatherRows {
  /** Rows of x (and ids read). */
  rows: number;
  /** Rows of the table, and its width (the norm's hidden size). */
  vocab: number;
  hidden: number;
  /** ids read as rows of seqLen, each shifted left by `shift` and zero-filled (a TTT step's ids). */
  seqLen: number;
  shift: number;
}

/** Whether `table` can be gathered from by these kernels: one binding, f32 or f16. */
export function gathersFromTable(table: Tensor): boolean {
  return table.parts.length === 1 && (table.dtype === 'f32' || table.dtype === 'f16');
}

/** gathersFromTable of the table Gpu.tensor would make of this shape and dtype under `maxBindingBytes` (the memory plan's question). */
export function gathersFromTableOf(shape: readonly number[], dtype: DType, maxBindingBytes: number): boolean {
  return (dtype === 'f32' || dtype === 'f16') && planTensorLayout(shape, dtype, maxBindingBytes).counts.length === 1;
}

export function checkGather(op: string, ids: Tensor, table: Tensor, g: GatherRows): void {
  checkInt(`${op}: rows`, g.rows, 0);
  checkInt(`${op}: vocab`, g.vocab);
  checkInt(`${op}: hidden`, g.hidden);
  checkInt(`${op}: seqLen`, g.seqLen);
  checkInt(`${op}: shift`, g.shift, 0);
  if (g.rows % g.seqLen !== 0) throw new Error(`${op}: rows = ${g.rows} are not whole sequences of seqLen = ${g.seqLen}`);
  checkSinglePart(op, 'ids', ids, 'i32', g.rows);
  if (!gathersFromTable(table))
    throw new Error(`${op}: table (${table.label}) must be one binding of f32 or f16, got ${table.parts.length} part(s) of ${table.dtype}`);
  if (table.shape.length !== 2 || table.shape[0] !== g.vocab || table.shape[1] !== g.hidden)
    throw new Error(`${op}: table (${table.label}) must have shape [${g.vocab}, ${g.hidden}], got [${table.shape.join(', ')}]`);
}

export const tableConstants = (table: Tensor) => ({ TABLE_F16: table.dtype === 'f16' ? 1 : 0 });

/** Encode y = rmsnorm(table[ids']) · w and invRms (no submit); y at row stride `strideY` (default hidden). */
export async function rmsnormGatherForward(
  gpu: Gpu,
  ids: Tensor,
  table: Tensor,
  w: Tensor,
  y: Tensor,
  invRms: Tensor,
  g: GatherRows & { eps: number; strideY?: number; variant?: RowVariant },
): Promise<void> {
  const op = 'rmsnormGatherForward';
  checkGather(op, ids, table, g);
  const strideY = g.strideY ?? g.hidden;
  checkStride(op, 'strideY', strideY, g.hidden);
  checkFinite(`${op}: eps`, g.eps);
  if (g.eps < 0) throw new Error(`${op}: eps must be ≥ 0, got ${g.eps}`);
  checkSinglePart(op, 'w', w, 'f32', g.hidden);
  checkSinglePart(op, 'y', y, 'f32', stridedExtent(g.rows, g.hidden, strideY));
  checkSinglePart(op, 'invRms', invRms, 'f32', g.rows);
  const inputs: [string, Tensor][] = [
    ['ids', ids],
    ['table', table],
    ['w', w],
  ];
  checkNoAlias(op, y, [...inputs, ['invRms', invRms]], 'y');
  checkNoAlias(op, invRms, inputs, 'invRms');
  const variant = resolveRowVariant(op, 'rmsnorm', gpu.ctx, { width: g.hidden, rows: g.rows }, RMSNORM_ROW_GEOMETRY, g.variant);
  const kernel = await gpu.pipelines.get(FORWARD_BY_VARIANT[variant], tableConstants(table));
  const uniforms = new UniformWriter().u32(g.rows).u32(g.hidden).u32(strideY).f32(g.eps).u32(g.seqLen).u32(g.shift).u32(g.vocab).finish();
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [table.binding(), w.binding(), y.binding(), invRms.binding(), ids.binding()],
    rowLayoutGrid(gpu.ctx, g.rows, variant, RMSNORM_ROW_GEOMETRY),
  );
}

/**
 * Encode dw (+)= Σ_rows dy ⊙ table[ids'] · invRms, the weight gradient of rmsnormGatherForward, with
 * dy at row stride `strideDy` (default hidden) and the invRms that forward saved (no submit).
 */
export async function rmsnormGatherBackwardDw(
  gpu: Gpu,
  ids: Tensor,
  table: Tensor,
  invRms: Tensor,
  dy: Tensor,
  dw: Tensor,
  g: GatherRows & { strideDy?: number },
  options: { accumulate?: boolean } = {},
): Promise<void> {
  const op = 'rmsnormGatherBackwardDw';
  checkGather(op, ids, table, g);
  const strideDy = g.strideDy ?? g.hidden;
  checkStride(op, 'strideDy', strideDy, g.hidden);
  checkSinglePart(op, 'invRms', invRms, 'f32', g.rows);
  checkSinglePart(op, 'dy', dy, 'f32', stridedExtent(g.rows, g.hidden, strideDy));
  checkSinglePart(op, 'dw', dw, 'f32', g.hidden);
  checkNoAlias(
    op,
    dw,
    [
      ['ids', ids],
      ['table', table],
      ['invRms', invRms],
      ['dy', dy],
    ],
    'dw',
  );
  const kernel = await gpu.pipelines.get(RMSNORM_GATHER_KERNELS.backwardDw, {
    ACCUMULATE: options.accumulate ?? false,
    ...tableConstants(table),
  });
  const uniforms = new UniformWriter().u32(g.rows).u32(g.hidden).u32(strideDy).u32(g.seqLen).u32(g.shift).u32(g.vocab).finish();
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [table.binding(), dy.binding(), invRms.binding(), dw.binding(), ids.binding()],
    [Math.ceil(g.hidden / RMSNORM_DW_COLUMNS_LANES)],
  );
}
