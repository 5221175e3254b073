/**
 * RoPE on a stacked q | k | v projection in one dispatch each way (shaders/rope/qkv-split.wgsl and
 * qkv-join.wgsl), for the EAGLE3 draft whose arena stacks W_q, W_k and W_v (model/eagle3/step-body.ts,
 * backward.ts):
 *   split  qkv [rows, qDim + 2·kvDim] → q [rows, qDim] and k [rows, kvDim] rotated, v [rows, kvDim] copied
 *   join   dq, dk (rotated back with the inverse table) and dv → dqkv [rows, qDim + 2·kvDim]
 * Each part gets the bits rope/table and copy/strided give it (the rotation is one source,
 * shaders/include/rope-rotate.wgsl); one dispatch where those took three, which is what counts at
 * the draft's small shapes, where every dispatch costs more than its arithmetic.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkInt, checkNoAlias, checkSinglePart, ELEMENTWISE_CONSTANTS, elementGrid } from './elementwise-common.ts';
import { checkRopeTable } from './rope-table.ts';
import { shaderSource } from './shader-source.ts';

export const ROPE_QKV_SPLIT_KERNEL: KernelDef = {
  name: 'rope/qkv-split',
  source: shaderSource('rope/qkv-split', ELEMENTWISE_CONSTANTS),
  bindings: ['uniform', 'read', 'read', 'read', 'write', 'write', 'write'],
};

export const ROPE_QKV_JOIN_KERNEL: KernelDef = {
  name: 'rope/qkv-join',
  source: shaderSource('rope/qkv-join', ELEMENTWISE_CONSTANTS),
  bindings: ['uniform', 'read', 'read', 'read', 'read', 'read', 'write'],
};

export interface RopeQkvArgs {
  rows: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
}

/** The three dense parts of a stacked row: q [rows, qDim], k and v [rows, kvDim]. */
export interface QkvParts {
  q: Tensor;
  k: Tensor;
  v: Tensor;
}

/** Checks shared by both directions (`wide` and the three parts by the names the op gives them); returns the uniforms and the grid. */
function prepare(
  gpu: Gpu,
  op: string,
  wide: [string, Tensor],
  parts: [string, Tensor][],
  positions: Tensor,
  table: Tensor,
  args: RopeQkvArgs,
) {
  const { rows, qHeads, kvHeads, headDim } = args;
  checkInt(`${op}: rows`, rows);
  checkInt(`${op}: qHeads`, qHeads);
  checkInt(`${op}: kvHeads`, kvHeads);
  const tableRows = checkRopeTable(op, positions, table, rows, headDim);
  const kvDim = kvHeads * headDim;
  checkSinglePart(op, wide[0], wide[1], 'f32', rows * (qHeads * headDim + 2 * kvDim));
  parts.forEach(([name, t], i) => checkSinglePart(op, name, t, 'f32', rows * (i === 0 ? qHeads * headDim : kvDim)));
  const uniforms = new UniformWriter().u32(rows).u32(qHeads).u32(kvHeads).u32(headDim).u32(tableRows).finish();
  // One invocation per work item: rows × qkvItemsPerRow() of shaders/include/rope-qkv-layout.wgsl.
  const grid = elementGrid(gpu, rows * ((qHeads + kvHeads) * (headDim / 2) + kvDim));
  return { uniforms, grid };
}

/** Encode q, k = RoPE(the q and k heads of `qkv`) and v = its v columns, with (cos, sin) = table[positions[row]]. */
export async function ropeQkvSplit(
  gpu: Gpu,
  qkv: Tensor,
  positions: Tensor,
  table: Tensor,
  out: QkvParts,
  args: RopeQkvArgs,
): Promise<void> {
  const op = 'ropeQkvSplit';
  const written: [string, Tensor][] = [
    ['q', out.q],
    ['k', out.k],
    ['v', out.v],
  ];
  const { uniforms, grid } = prepare(gpu, op, ['qkv', qkv], written, positions, table, args);
  const read: [string, Tensor][] = [
    ['qkv', qkv],
    ['positions', positions],
    ['table', table],
  ];
  for (const [name, t] of written) checkNoAlias(op, t, [...written.filter(([other]) => other !== name), ...read], name);
  const kernel = await gpu.pipelines.get(ROPE_QKV_SPLIT_KERNEL);
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [positions.binding(), table.binding(), qkv.binding(), out.q.binding(), out.k.binding(), out.v.binding()],
    grid,
  );
}

/**
 * Encode dqkv = [RoPE(dq) | RoPE(dk) | dv] row by row with (c, s) = table[positions[row]]: given the
 * inverse table (inverseRopeTable), the gradient of ropeQkvSplit. Every element of dqkv is written.
 */
export async function ropeQkvJoin(
  gpu: Gpu,
  grads: QkvParts,
  positions: Tensor,
  table: Tensor,
  dqkv: Tensor,
  args: RopeQkvArgs,
): Promise<void> {
  const op = 'ropeQkvJoin';
  const read: [string, Tensor][] = [
    ['dq', grads.q],
    ['dk', grads.k],
    ['dv', grads.v],
  ];
  const { uniforms, grid } = prepare(gpu, op, ['dqkv', dqkv], read, positions, table, args);
  checkNoAlias(op, dqkv, [...read, ['positions', positions], ['table', table]], 'dqkv');
  const kernel = await gpu.pipelines.get(ROPE_QKV_JOIN_KERNEL);
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [positions.binding(), table.binding(), grads.q.binding(), grads.k.binding(), grads.v.binding(), dqkv.binding()],
    grid,
  );
}
