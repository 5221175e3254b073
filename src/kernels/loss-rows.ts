/**
 * Shared plumbing of the row-wise loss kernels (teacher, soft/hard cross-entropy, metrics):
 * shape/dtype validation, row segmentation over chunked tensors, the row layouts (each kernel in
 * the `wide`, `rows` and `subgroup` variants of src/kernels/row-variant.ts, sized by
 * LOSS_ROW_GEOMETRY) with their grids. The deterministic reduction of their row outputs is
 * loss-reduce.ts.
 *
 * Row tensors: every per-row tensor is viewed as [rows, width] (a [B, S, W] or [B, S] tensor
 * qualifies when B·S = rows). A tensor larger than one binding is split into parts of whole outer
 * rows (src/gpu/tensor.ts); the kernels take, per tensor, the global row where the bound part
 * starts, and the host dispatches once per *segment* — a row range inside which every tensor's rows
 * come from a single part. A tensor read with the TTT shift k (row r reads row r + k) contributes
 * its part boundaries moved by −k, so a segment never straddles a part of it either.
 *
 * Row windows (the chunked head of model/eagle3/step-head.ts): a dispatch may cover only the rows
 * [start, start + count) of the R rows, and an operand may hold only a window of them (its row 0 is
 * global row `firstRow`). The kernels need no change: a window is bound as a part whose first row is
 * firstRow, exactly as a part of a split tensor is.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type DType, type Tensor, type TensorPart } from '../gpu/tensor.ts';
import { checkRowGeometries, resolveRowVariant, rowLayoutGrid, type RowGeometries, type RowVariant } from './row-variant.ts';
import { shaderSource } from './shader-source.ts';

/**
 * The sized row layouts of the loss kernels (LANES lanes per row, ROWS rows per workgroup). LANES 8
 * is the subgroup width of llvmpipe (one AVX vector); ROWS rows share a workgroup to spread its launch cost (not tuned further;
 * bench/row-variants.ts times the variants, bench/RESULTS.md "Row kernels" has the numbers).
 */
export const LOSS_ROW_GEOMETRY: RowGeometries = checkRowGeometries('loss', {
  rows: { LANES: 8, ROWS: 8 },
  subgroup: { LANES: 8, ROWS: 4 },
});

/** Options every row-wise loss kernel takes. */
export interface RowKernelOptions {
  /** Row layout (tests, benchmarks); default chooseRowVariant's choice for this device. */
  variant?: RowVariant;
}

/**
 * The three layouts of one loss kernel: `wide` is its original shaders/<shader>.wgsl, the others
 * shaders/<shader>-rows.wgsl and -subgroup.wgsl with the same bindings and overrides.
 */
export function lossRowKernels(wide: KernelDef): Readonly<Record<RowVariant, KernelDef>> {
  return {
    wide,
    rows: { ...wide, name: `${wide.name}-rows`, source: shaderSource(`${wide.name}-rows`, LOSS_ROW_GEOMETRY.rows) },
    subgroup: {
      ...wide,
      name: `${wide.name}-subgroup`,
      source: shaderSource(`${wide.name}-subgroup`, LOSS_ROW_GEOMETRY.subgroup),
      requires: ['subgroups'],
    },
  };
}

/** The layout a loss kernel runs in: `override` if given (refused with its reason when unsupported), else the policy's. */
export function lossRowVariant(gpu: Gpu, op: string, width: number, rows: number, override?: RowVariant): RowVariant {
  return resolveRowVariant(op, 'loss', gpu.ctx, { width, rows }, LOSS_ROW_GEOMETRY, override);
}

/** The grid of one segment of `count` rows in `variant`'s layout (`wide`: one workgroup per row, as rowGrid). */
export function lossRowGrid(gpu: Gpu, count: number, variant: RowVariant): [number, number, number] {
  return variant === 'wide' ? rowGrid(gpu, count) : rowLayoutGrid(gpu.ctx, count, variant, LOSS_ROW_GEOMETRY);
}

/** Fail unless `t` can be viewed as [rows, width] of `dtype`; errors name the op and the tensor. */
export function checkRowTensor(op: string, name: string, t: Tensor, dtype: DType, rows: number, width: number): void {
  if (t.dtype !== dtype) throw new Error(`${op}: ${name} (${t.label}) must be ${dtype}, got ${t.dtype}`);
  const outer = t.shape.length === 0 ? 1 : t.shape[0];
  const last = t.shape.length === 0 ? 1 : t.shape[t.shape.length - 1];
  const ok = t.numel === rows * width && outer > 0 && rows % outer === 0 && (width === 1 || last === width);
  if (!ok) {
    throw new Error(
      `${op}: ${name} (${t.label}) has shape ${fmtShape(t.shape)}; expected ${rows} rows × ${width} (e.g. ${fmtShape(width === 1 ? [rows] : [rows, width])})`,
    );
  }
}

/** Fail unless `t` is a single-part `dtype` vector of exactly `length` elements. */
export function checkVector(op: string, name: string, t: Tensor, dtype: DType, length: number): void {
  if (t.dtype !== dtype) throw new Error(`${op}: ${name} (${t.label}) must be ${dtype}, got ${t.dtype}`);
  if (t.numel !== length) throw new Error(`${op}: ${name} (${t.label}) has shape ${fmtShape(t.shape)}; expected ${length} elements`);
  if (t.isChunked) throw new Error(`${op}: ${name} (${t.label}) is split into ${t.parts.length} parts; it must fit one binding`);
}

export function checkPositiveInt(op: string, name: string, value: number): void {
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${op}: ${name} must be a positive integer, got ${value}`);
}

/**
 * Fail if a written tensor shares a GPU buffer with any other operand of the same dispatch
 * (a writable binding aliasing another binding is invalid in WebGPU). Read-only operands may share.
 */
export function checkDistinct(
  op: string,
  writes: Readonly<Record<string, Tensor | undefined>>,
  reads: Readonly<Record<string, Tensor | undefined>>,
): void {
  const owner = new Map<GPUBuffer, string>();
  for (const [name, t] of Object.entries(writes)) {
    for (const p of t?.parts ?? []) {
      const other = owner.get(p.buffer);
      if (other !== undefined)
        throw new Error(`${op}: ${name} and ${other} share a GPU buffer; pass distinct tensors (or use the in-place mode)`);
      owner.set(p.buffer, name);
    }
  }
  for (const [name, t] of Object.entries(reads)) {
    for (const p of t?.parts ?? []) {
      const other = owner.get(p.buffer);
      if (other !== undefined) throw new Error(`${op}: ${name} and ${other} share a GPU buffer; an output must not alias an input`);
    }
  }
}

export interface RowOperand {
  readonly tensor: Tensor;
  /** Rows are read at r + shift (the TTT offset); 0 for plain row-aligned operands. */
  readonly shift?: number;
  /** The tensor holds only `rows` rows of the view, from global row `firstRow` (default: all of them). */
  readonly window?: RowWindow;
}

/** Rows [firstRow, firstRow + rows) of the R rows of a row-wise kernel. */
export interface RowWindow {
  readonly firstRow: number;
  readonly rows: number;
}

export interface SegmentBinding {
  readonly binding: GPUBufferBinding;
  /** Global row (in units of the [rows, width] view) where the bound part starts. */
  readonly partRow: number;
}

export interface RowSegment {
  readonly start: number;
  readonly count: number;
  /** One entry per operand, in the order given. */
  readonly operands: readonly SegmentBinding[];
}

/** t's parts as global row ranges: of its [rows, ·] view, or of the window it holds. */
function partRows(t: Tensor, rows: number, window?: RowWindow): { part: TensorPart; start: number; end: number }[] {
  const held = window?.rows ?? rows;
  const first = window?.firstRow ?? 0;
  const perPartRow = (held * t.rowElements) / t.numel;
  return t.parts.map((part) => ({
    part,
    start: first + part.rowStart * perPartRow,
    end: first + (part.rowStart + part.rowCount) * perPartRow,
  }));
}

/**
 * Split the rows [range.start, range.start + range.count) (default all `rows`) into segments inside
 * which every operand (shift applied) lies in one part. A windowed operand must hold every row the
 * range reads of it that is not a pad row (row + shift past its sequence, which the kernels never read).
 * Neighbouring segments that bind the same parts are one segment (one dispatch): a shifted operand of
 * one part cuts the rows where its shifted end falls, but both sides bind that same part.
 */
export function rowSegments(
  rows: number,
  operands: readonly RowOperand[],
  range: { start: number; count: number } = { start: 0, count: rows },
): RowSegment[] {
  const from = range.start;
  const to = range.start + range.count;
  if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || to > rows || to <= from)
    throw new Error(`rowSegments: rows [${from}, ${to}) are not a non-empty range of the ${rows} rows`);
  const cuts = new Set<number>([from, to]);
  const spans = operands.map((o) => partRows(o.tensor, rows, o.window));
  operands.forEach((o, i) => {
    for (const s of spans[i]) {
      for (const edge of [s.start, s.end]) {
        const at = edge - (o.shift ?? 0);
        if (at > from && at < to) cuts.add(at);
      }
    }
  });
  const edges = [...cuts].sort((a, b) => a - b);
  const segments: RowSegment[] = [];
  for (let i = 0; i + 1 < edges.length; i++) {
    const start = edges[i];
    const count = edges[i + 1] - start;
    const bound = operands.map((o, j) => {
      // Rows past the end (start + shift ≥ rows) or past a window are pad rows the kernel never reads: bind the last part.
      const first = Math.min(start + (o.shift ?? 0), rows - 1);
      const span = spans[j].find((s) => first >= s.start && first < s.end) ?? spans[j][spans[j].length - 1];
      return { binding: { buffer: span.part.buffer, offset: span.part.byteOffset, size: span.part.byteLength }, partRow: span.start };
    });
    const last = segments.at(-1);
    if (last && sameBindings(last.operands, bound)) segments[segments.length - 1] = { ...last, count: last.count + count };
    else segments.push({ start, count, operands: bound });
  }
  return segments;
}

function sameBindings(a: readonly SegmentBinding[], b: readonly SegmentBinding[]): boolean {
  return a.every((x, i) => {
    const y = b[i];
    return (
      x.partRow === y.partRow &&
      x.binding.buffer === y.binding.buffer &&
      x.binding.offset === y.binding.offset &&
      x.binding.size === y.binding.size
    );
  });
}

/** Fail unless `window` is a non-empty row range of `rows` and `t` holds exactly its rows × width. */
export function checkWindowTensor(op: string, name: string, t: Tensor, dtype: DType, window: RowWindow, rows: number, width: number): void {
  if (!Number.isInteger(window.firstRow) || !Number.isInteger(window.rows) || window.firstRow < 0 || window.rows < 1)
    throw new Error(`${op}: ${name} window [${window.firstRow}, +${window.rows}) is not a non-empty row range`);
  if (window.firstRow + window.rows > rows)
    throw new Error(`${op}: ${name} window [${window.firstRow}, ${window.firstRow + window.rows}) runs past the ${rows} rows`);
  checkRowTensor(op, name, t, dtype, window.rows, width);
}

/** Workgroup grid for one row per workgroup: (min(n, 65535), ceil(n / 65535)). */
export function rowGrid(gpu: Gpu, count: number): [number, number, number] {
  const maxPerDim = gpu.ctx.limits.maxComputeWorkgroupsPerDimension ?? 65535;
  const x = Math.min(count, maxPerDim);
  return [x, Math.ceil(count / x), 1];
}

const dummies = new WeakMap<Gpu, Tensor>();

/** A tiny buffer for bindings a kernel variant declares but never touches (e.g. no gradient output). */
export function placeholder(gpu: Gpu): Tensor {
  let t = dummies.get(gpu);
  if (!t) dummies.set(gpu, (t = gpu.tensor([4], 'f32', 'loss-placeholder')));
  return t;
}
