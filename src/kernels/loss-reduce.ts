/**
 * The deterministic reduction of the loss family's per-row outputs (shaders/loss/reduce.wgsl): one
 * workgroup sums each column of a small table in a fixed order, so losses and metrics have the same
 * bits every run (no float atomics).
 *
 * `reduceColumns` sums a row-major [rows, cols] table (metric terms, one step's row losses).
 * `reduceTable` takes any strides and, optionally, a weighted total of the column sums: the EAGLE3
 * training step reduces every TTT step's row losses ([steps, stride], a step's rows contiguous) into
 * the per-step losses and their 0.8ᵏ-weighted total in one dispatch, with the bits of one reduction
 * per step and per total term (the gradient-free forward's order); and, as `groups`, every step's
 * [rows, 4] metric terms into its four sums, also in one dispatch.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type DType, type Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkDistinct, checkPositiveInt } from './loss-rows.ts';
import { shaderSource } from './shader-source.ts';

export const REDUCE_KERNEL: KernelDef = {
  name: 'loss/reduce',
  source: shaderSource('loss/reduce'),
  bindings: ['uniform', 'read', 'write'],
};

/** Columns one dispatch can weigh into a total: the weights ride in the 256-byte uniform block (Params.weights in reduce.wgsl). */
export const MAX_REDUCE_WEIGHTS = 48;

export interface ReduceOptions {
  rows: number;
  cols: number;
  /** First element of `out` written. */
  outOffset: number;
  scale?: number;
  /** Add to what `out` holds instead of overwriting. */
  accumulate?: boolean;
  /** 'sum' reads f32 values; 'count-nonnegative' counts i32 entries ≥ 0 (non-ignored labels). */
  mode?: 'sum' | 'count-nonnegative';
}

export interface TableReduceOptions extends ReduceOptions {
  /** Element distance between consecutive rows, and between consecutive columns, of the table. */
  rowStride: number;
  colStride: number;
  /** out[total.offset] (+)= Σ_c total.weights[c] · S_c, in column order; one weight per column. */
  total?: { offset: number; weights: readonly number[]; accumulate?: boolean };
  /**
   * `count` tables of this shape, table g starting `inStride` elements after table g − 1 and its column
   * sums written `outStride` elements after g − 1's, in one dispatch (each with the bits of its own
   * reduction). Not with `total`.
   */
  groups?: { count: number; inStride: number; outStride: number };
}

/**
 * out[outOffset + c] (+)= scale · Σ_r input[r, c], deterministically (one workgroup, fixed order).
 * `input` (f32 or i32 [rows·cols]) and `out` (f32) must each fit one binding.
 */
export async function reduceColumns(gpu: Gpu, input: Tensor, out: Tensor, options: ReduceOptions): Promise<void> {
  await reduceTable(gpu, input, out, { ...options, rowStride: options.cols, colStride: 1 }, 'reduceColumns');
}

/**
 * out[outOffset + c] (+)= scale · S_c with S_c = Σ_r input[c · colStride + r · rowStride], and the
 * weighted total when asked; more than MAX_REDUCE_WEIGHTS weighted columns take one dispatch per
 * MAX_REDUCE_WEIGHTS, the total carried from one to the next (the same bits).
 */
export async function reduceTable(gpu: Gpu, input: Tensor, out: Tensor, options: TableReduceOptions, op = 'reduceTable'): Promise<void> {
  const { rows, cols, outOffset, scale = 1, accumulate = false, mode = 'sum', rowStride, colStride, total } = options;
  const groups = options.groups ?? { count: 1, inStride: 0, outStride: 0 };
  checkPositiveInt(op, 'rows', rows);
  checkPositiveInt(op, 'cols', cols);
  checkPositiveInt(op, 'rowStride', rowStride);
  checkPositiveInt(op, 'colStride', colStride);
  checkPositiveInt(op, 'groups.count', groups.count);
  if (groups.count > 1) {
    checkPositiveInt(op, 'groups.inStride', groups.inStride);
    checkPositiveInt(op, 'groups.outStride', groups.outStride);
    if (total) throw new Error(`${op}: a weighted total sums one table's columns; it cannot take groups (${groups.count})`);
  }
  const want: DType = mode === 'sum' ? 'f32' : 'i32';
  if (input.dtype !== want) throw new Error(`${op}: input (${input.label}) must be ${want} for mode ${mode}, got ${input.dtype}`);
  const extent = (groups.count - 1) * groups.inStride + (cols - 1) * colStride + (rows - 1) * rowStride + 1;
  if (input.numel < extent)
    throw new Error(`${op}: input (${input.label} ${fmtShape(input.shape)}) has ${input.numel} elements, rows × cols needs ${extent}`);
  if (out.dtype !== 'f32') throw new Error(`${op}: out (${out.label}) must be f32, got ${out.dtype}`);
  const outEnd = outOffset + (groups.count - 1) * groups.outStride + cols;
  if (!Number.isInteger(outOffset) || outOffset < 0 || outEnd > out.numel) {
    throw new Error(
      `${op}: out (${out.label} ${fmtShape(out.shape)}) cannot hold ${groups.count} × ${cols} values from offset ${outOffset}`,
    );
  }
  if (total) {
    if (total.weights.length !== cols)
      throw new Error(`${op}: total.weights has ${total.weights.length} entries, one per column needs ${cols}`);
    if (!Number.isInteger(total.offset) || total.offset < 0 || total.offset >= out.numel)
      throw new Error(`${op}: out (${out.label} ${fmtShape(out.shape)}) has no element ${total.offset} for the total`);
    if (total.offset >= outOffset && total.offset < outOffset + cols)
      throw new Error(`${op}: the total at ${total.offset} falls among the column sums at [${outOffset}, ${outOffset + cols})`);
  }
  checkDistinct(op, { out }, { input });
  const group = total ? MAX_REDUCE_WEIGHTS : cols;
  for (let c0 = 0; c0 < cols; c0 += group) {
    const n = Math.min(group, cols - c0);
    const kernel = await gpu.pipelines.get(REDUCE_KERNEL, {
      MODE: mode === 'sum' ? 0 : 1,
      ACCUMULATE: accumulate,
      TOTAL: total !== undefined,
      ACCUMULATE_TOTAL: total !== undefined && (c0 > 0 || (total.accumulate ?? false)),
    });
    const w = new UniformWriter()
      .u32(rows)
      .u32(n)
      .u32(outOffset + c0)
      .f32(scale)
      .u32(rowStride)
      .u32(colStride)
      .u32(total?.offset ?? 0)
      .u32(c0 * colStride)
      .u32(groups.count)
      .u32(groups.inStride)
      .u32(groups.outStride)
      .u32(0); // padding: the weights start on 16 bytes
    for (let c = 0; c < n && total; c++) w.f32(total.weights[c0 + c]);
    gpu.batcher.dispatch(kernel, w.finish(), [input.binding(), out.binding()], [1, 1, 1]);
  }
}
