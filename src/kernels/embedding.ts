/**
 * Embedding lookup: out[n, :] = table[ids[n], :], and its backward, the scatter-add of dOut rows
 * into dTable rows.
 *
 * WebGPU has no float atomics, so the backward is made deterministic in two passes:
 *   embedding/links   — for each position, the next position with the same id and whether it is
 *                       the first occurrence (integer work only);
 *   embedding/scatter — each first occurrence walks its chain and adds the column sums once.
 * The table (and dTable) may be split into row parts (a vocab-sized table can exceed one binding):
 * both directions dispatch once per part, and each part only handles ids it holds.
 * Ids outside [0, vocab) read as a zero row and receive no gradient (padding ids such as -1).
 * The forward also reads an f16 table (embedding/gather-f16: f16 storage of a frozen target's
 * embedding, widened exactly to f32 output); the backward is f32 only (trained tables are f32).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkInt, checkNoAlias, checkSinglePart, checkTensor, ELEMENTWISE_CONSTANTS, elementGrid } from './elementwise-common.ts';
import { shaderSource } from './shader-source.ts';

export const EMBEDDING_KERNELS = {
  gather: {
    name: 'embedding/gather',
    source: shaderSource('embedding/gather', { ...ELEMENTWISE_CONSTANTS, TABLE_F16: 0 }),
    bindings: ['uniform', 'read', 'read', 'write'],
  },
  gatherF16: {
    name: 'embedding/gather-f16',
    source: shaderSource('embedding/gather-f16', { ...ELEMENTWISE_CONSTANTS, TABLE_F16: 1 }),
    bindings: ['uniform', 'read', 'read', 'write'],
  },
  links: {
    name: 'embedding/links',
    source: shaderSource('embedding/links', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'write'],
  },
  scatter: {
    name: 'embedding/scatter',
    source: shaderSource('embedding/scatter', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'read', 'read', 'write'],
  },
} as const satisfies Record<string, KernelDef>;

export interface EmbeddingShape {
  /** Number of ids (rows of the output). */
  n: number;
  /** Rows of the table. */
  vocab: number;
  /** Columns of the table and the output. */
  hidden: number;
}

function checkShape(op: string, shape: EmbeddingShape): void {
  checkInt(`${op}: n`, shape.n, 0);
  checkInt(`${op}: vocab`, shape.vocab);
  checkInt(`${op}: hidden`, shape.hidden);
}

/** Checks that a table-like tensor has exactly `vocab` rows of `hidden` (row parts must hold whole rows). */
function checkTable(op: string, name: string, t: Tensor, shape: EmbeddingShape, dtype: 'f32' | 'f16' = 'f32'): void {
  checkTensor(op, name, t, dtype, shape.vocab * shape.hidden);
  if (t.shape[0] !== shape.vocab || t.rowElements !== shape.hidden) {
    throw new Error(`${op}: ${name} (${t.label}) must have shape [${shape.vocab}, ${shape.hidden}], got [${t.shape.join(', ')}]`);
  }
}

/**
 * The ids read as rows of `seqLen`, each shifted left by `shift` and zero-filled (SpecForge's
 * `padding(x, left=False)`, a TTT step's input ids), without a shifted copy of them.
 */
export interface ShiftedIds {
  seqLen: number;
  shift: number;
}

/** Encode out[n, :] = table[ids[n], :], or the rows of `shifted` ids (no submit). */
export async function embeddingForward(
  gpu: Gpu,
  ids: Tensor,
  table: Tensor,
  out: Tensor,
  shape: EmbeddingShape,
  shifted?: ShiftedIds,
): Promise<void> {
  const op = 'embeddingForward';
  checkShape(op, shape);
  const { n, vocab, hidden } = shape;
  const seqLen = shifted?.seqLen ?? Math.max(n, 1);
  const shift = shifted?.shift ?? 0;
  if (shifted) {
    checkInt(`${op}: shifted.seqLen`, seqLen);
    checkInt(`${op}: shifted.shift`, shift, 0);
    if (n % seqLen !== 0) throw new Error(`${op}: n = ${n} ids are not whole rows of shifted.seqLen = ${seqLen}`);
  }
  checkSinglePart(op, 'ids', ids, 'i32', n);
  checkTable(op, 'table', table, shape, table.dtype === 'f16' ? 'f16' : 'f32');
  checkSinglePart(op, 'out', out, 'f32', n * hidden);
  checkNoAlias(op, out, [['table', table]], 'out');
  const kernel = await gpu.pipelines.get(table.dtype === 'f16' ? EMBEDDING_KERNELS.gatherF16 : EMBEDDING_KERNELS.gather);
  const grid = elementGrid(gpu, n * hidden);
  table.parts.forEach((part, i) => {
    const uniforms = new UniformWriter()
      .u32(n)
      .u32(hidden)
      .u32(vocab)
      .u32(part.rowStart)
      .u32(part.rowCount)
      .u32(i === 0 ? 1 : 0)
      .u32(seqLen)
      .u32(shift)
      .finish();
    const tablePart = { buffer: part.buffer, offset: part.byteOffset, size: part.byteLength };
    gpu.batcher.dispatch(kernel, uniforms, [ids.binding(), tablePart, out.binding()], grid);
  });
}

export interface EmbeddingBackwardOptions {
  /** Add into dTable instead of overwriting it (gradient accumulation). Default false. */
  accumulate?: boolean;
}

/**
 * Encode dTable (+)= scatter-add of dOut rows by ids (no submit). `links` is an i32 workspace of
 * at least 2·n elements (see shaders/embedding/links.wgsl); its contents afterwards are scratch.
 */
export async function embeddingBackward(
  gpu: Gpu,
  ids: Tensor,
  dOut: Tensor,
  dTable: Tensor,
  links: Tensor,
  shape: EmbeddingShape,
  options: EmbeddingBackwardOptions = {},
): Promise<void> {
  const op = 'embeddingBackward';
  checkShape(op, shape);
  const { n, vocab, hidden } = shape;
  checkSinglePart(op, 'ids', ids, 'i32', n);
  checkSinglePart(op, 'dOut', dOut, 'f32', n * hidden);
  checkTable(op, 'dTable', dTable, shape);
  checkSinglePart(op, 'links', links, 'i32', 2 * n);
  checkNoAlias(
    op,
    dTable,
    [
      ['dOut', dOut],
      ['ids', ids],
      ['links', links],
    ],
    'dTable',
  );
  checkNoAlias(op, links, [['ids', ids]], 'links');
  if (!options.accumulate) for (const part of dTable.parts) gpu.batcher.clearBuffer(part.buffer, part.byteOffset, part.byteLength);
  if (n === 0) return;
  const [linksKernel, scatterKernel] = await Promise.all([
    gpu.pipelines.get(EMBEDDING_KERNELS.links),
    gpu.pipelines.get(EMBEDDING_KERNELS.scatter),
  ]);
  gpu.batcher.dispatch(linksKernel, new UniformWriter().u32(n).u32(vocab).finish(), [ids.binding(), links.binding()], elementGrid(gpu, n));
  const grid = elementGrid(gpu, n * hidden);
  for (const part of dTable.parts) {
    const uniforms = new UniformWriter().u32(n).u32(hidden).u32(part.rowStart).u32(part.rowCount).finish();
    const tablePart = { buffer: part.buffer, offset: part.byteOffset, size: part.byteLength };
    gpu.batcher.dispatch(scatterKernel, uniforms, [ids.binding(), links.binding(), dOut.binding(), tablePart], grid);
  }
}
