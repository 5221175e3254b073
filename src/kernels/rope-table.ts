/**
 * RoPE from a cos/sin table (shaders/rope/table.wgsl), used by the target model and the EAGLE3 draft.
 *
 * The table is built on the host, emulating Hugging Face's float32 computation: inverse frequencies
 * (with the config's scaling: default, linear or llama3) rounded to f32, the angle as the f32 product
 * position · invFreq, then cos and sin of that angle rounded to f32. So every scaling is supported,
 * long positions round like HF's, and the result does not depend on the WGSL sin/cos accuracy
 * (which is ~1e-4 on some software adapters).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { ropeInverseFrequencies, type TargetModelConfig } from '../config/hf-config.ts';
import { checkInt, checkNoAlias, checkSinglePart, ELEMENTWISE_CONSTANTS, elementGrid } from './elementwise-common.ts';
import { shaderSource } from './shader-source.ts';

export const ROPE_TABLE_KERNEL: KernelDef = {
  name: 'rope/table',
  source: shaderSource('rope/table', ELEMENTWISE_CONSTANTS),
  bindings: ['uniform', 'read', 'read', 'read', 'write'],
};

/** (cos, sin) for positions 0..positions−1: f32 [positions, headDim / 2, 2]. */
export function buildRopeTable(config: Pick<TargetModelConfig, 'headDim' | 'ropeTheta' | 'ropeScaling'>, positions: number): Float32Array {
  checkInt('buildRopeTable: positions', positions, 1);
  const inv = ropeInverseFrequencies(config).map(Math.fround);
  const half = inv.length;
  const table = new Float32Array(positions * half * 2);
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(p * inv[i]);
      table[(p * half + i) * 2] = Math.cos(angle);
      table[(p * half + i) * 2 + 1] = Math.sin(angle);
    }
  }
  return table;
}

/** (cos, −sin) pairs: the rotation by −angle, which is the backward (R is orthogonal: dx = Rᵀ dy). */
export function inverseRopeTable(table: Float32Array): Float32Array {
  const out = Float32Array.from(table);
  for (let i = 1; i < out.length; i += 2) out[i] = -out[i];
  return out;
}

/**
 * Checks the head size (even, ≥ 2), the table (whole [headDim / 2, 2] rows, one binding) and the
 * positions (i32, one per row, one binding) of a table-driven RoPE kernel; returns the table's rows.
 */
export function checkRopeTable(op: string, positions: Tensor, table: Tensor, rows: number, headDim: number): number {
  checkInt(`${op}: headDim`, headDim, 2);
  if (headDim % 2 !== 0) throw new Error(`${op}: headDim must be even, got ${headDim}`);
  const half = headDim / 2;
  if (table.numel % (half * 2) !== 0 || table.numel === 0)
    throw new Error(`${op}: table (${table.label}) has ${table.numel} elements, not a whole number of [headDim/2 = ${half}, 2] rows`);
  const tableRows = table.numel / (half * 2);
  checkSinglePart(op, 'positions', positions, 'i32', rows);
  checkSinglePart(op, 'table', table, 'f32', tableRows * half * 2);
  return tableRows;
}

export interface RopeTableArgs {
  rows: number;
  nHeads: number;
  headDim: number;
  /** Row strides and element offsets of x and y; default dense (stride nHeads · headDim, offset 0). */
  strideX?: number;
  offsetX?: number;
  strideY?: number;
  offsetY?: number;
}

/** Encode y = RoPE(x) with (cos, sin) = table[positions[row]] (no submit). */
export async function ropeTableForward(
  gpu: Gpu,
  x: Tensor,
  positions: Tensor,
  table: Tensor,
  y: Tensor,
  args: RopeTableArgs,
): Promise<void> {
  const op = 'ropeTableForward';
  const { rows, nHeads, headDim } = args;
  checkInt(`${op}: rows`, rows, 0);
  checkInt(`${op}: nHeads`, nHeads);
  const tableRows = checkRopeTable(op, positions, table, rows, headDim);
  const half = headDim / 2;
  const width = nHeads * headDim;
  const [strideX, offsetX, strideY, offsetY] = [args.strideX ?? width, args.offsetX ?? 0, args.strideY ?? width, args.offsetY ?? 0];
  checkInt(`${op}: strideX`, strideX, width);
  checkInt(`${op}: strideY`, strideY, width);
  checkInt(`${op}: offsetX`, offsetX, 0);
  checkInt(`${op}: offsetY`, offsetY, 0);
  checkSinglePart(op, 'x', x, 'f32', rows === 0 ? 0 : offsetX + (rows - 1) * strideX + width);
  checkSinglePart(op, 'y', y, 'f32', rows === 0 ? 0 : offsetY + (rows - 1) * strideY + width);
  checkNoAlias(
    op,
    y,
    [
      ['x', x],
      ['positions', positions],
      ['table', table],
    ],
    'y',
  );
  if (rows === 0) return;
  const kernel = await gpu.pipelines.get(ROPE_TABLE_KERNEL);
  const uniforms = new UniformWriter()
    .u32(rows)
    .u32(nHeads)
    .u32(headDim)
    .u32(tableRows)
    .u32(strideX)
    .u32(offsetX)
    .u32(strideY)
    .u32(offsetY)
    .finish();
  gpu.batcher.dispatch(
    kernel,
    uniforms,
    [positions.binding(), table.binding(), x.binding(), y.binding()],
    elementGrid(gpu, rows * nHeads * half),
  );
}
