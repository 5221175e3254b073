/**
 * The target's lm_head restricted to the draft vocabulary: the rows of lm_head [V, Ht] at the draft's
 * target ids (`used`, ascending), gathered once into an f32 [D, Ht] table on the GPU. With compact
 * features (docs/features.md §8) the trainer's forward turns the target's final hidden state into the
 * target's logits of the D draft tokens with it, whole when they fit one binding, else a row window at
 * a time (model/eagle3/teacher-source.ts), never [..., V]; the teacher then needs only those, the
 * full-vocabulary logsumexp and the argmax the rollout sent (kernels/teacher.ts buildTeacherPruned). The lm_head may be f32 or f16 (widened exactly) and split
 * into row parts; the gathered table is split too when it exceeds a binding.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import { Tensor } from '../../gpu/tensor.ts';
import { embeddingForward } from '../../kernels/embedding.ts';
import type { HfCheckpointSource } from '../../formats/hf-checkpoint-source.ts';
import { f16ToF32 } from '../../formats/safetensors.ts';
import { DEFAULT_SLICE_BYTES } from './weight-stream.ts';
import type { GpuTargetWeights } from './weights.ts';

export class DraftHead {
  private constructor(
    private readonly gpu: Gpu,
    /** f32 [D, Ht]: row d = lm_head row used[d]. */
    readonly table: Tensor,
  ) {}

  /** Gathers the lm_head rows of `used` (target ids of the draft tokens, each in [0, V)). */
  static async gather(gpu: Gpu, weights: Pick<GpuTargetWeights, 'lmHead'>, used: ArrayLike<number>): Promise<DraftHead> {
    const head = weights.lmHead;
    const [V, Ht] = head.shape;
    const D = used.length;
    for (let d = 0; d < D; d++)
      if (!Number.isInteger(used[d]) || used[d] < 0 || used[d] >= V)
        throw new Error(`DraftHead: draft token ${d} maps to target id ${used[d]}, outside the vocabulary [0, ${V})`);
    const table = gpu.tensor([D, Ht], 'f32', 'draft_head');
    const ids: Tensor[] = [];
    try {
      // One gather per part of the table: each part's rows take the ids of those draft tokens.
      for (const part of table.parts) {
        const slice = gpu.upload(
          [part.rowCount],
          'i32',
          Int32Array.from({ length: part.rowCount }, (_, i) => used[part.rowStart + i]),
          'draft_head.ids',
        );
        ids.push(slice);
        const out = { ...part, rowStart: 0 };
        const partTable = new Tensor([part.rowCount, Ht], 'f32', [out], `draft_head[${part.rowStart}:]`);
        await embeddingForward(gpu, slice, head, partTable, { n: part.rowCount, vocab: V, hidden: Ht });
      }
    } catch (err) {
      gpu.release(table);
      throw err;
    } finally {
      gpu.release(...ids);
    }
    return new DraftHead(gpu, table);
  }

  /**
   * The same table read from the checkpoint's files, without the lm_head on the GPU (a trainer that
   * holds no target): the rows of `name` at `used` (ascending), read a slice of rows at a time as
   * `format` (the precision the target would be loaded at, so an f16 target gives the rows the GPU
   * gather gives: f16 bits widened exactly) and written into the table. The host holds one slice.
   */
  static async read(
    gpu: Gpu,
    source: Pick<HfCheckpointSource, 'tensors' | 'readRows'>,
    name: string,
    used: ArrayLike<number>,
    format: 'f32' | 'f16',
    sliceBytes = DEFAULT_SLICE_BYTES,
  ): Promise<DraftHead> {
    const spec = source.tensors.find((t) => t.name === name);
    if (!spec || spec.shape.length !== 2) throw new Error(`DraftHead: the checkpoint has no matrix "${name}"`);
    const [V, Ht] = spec.shape;
    const D = used.length;
    for (let d = 0; d < D; d++)
      if (!Number.isInteger(used[d]) || used[d] < 0 || used[d] >= V || (d > 0 && used[d] <= used[d - 1]))
        throw new Error(`DraftHead: draft token ${d} maps to target id ${used[d]}: ids must ascend within the vocabulary [0, ${V})`);
    const rowsPerSlice = Math.max(1, Math.floor(sliceBytes / (Ht * 4)));
    const table = gpu.tensor([D, Ht], 'f32', 'draft_head');
    try {
      for (let d = 0; d < D;) {
        // The draft rows whose target ids lie within one slice of rows from used[d].
        const first = used[d];
        let end = d;
        while (end < D && used[end] < first + rowsPerSlice) end++;
        const rows = await source.readRows(name, first, used[end - 1] - first + 1, format);
        const out = new Float32Array((end - d) * Ht);
        for (let i = d; i < end; i++) {
          const at = (used[i] - first) * Ht;
          for (let j = 0; j < Ht; j++) out[(i - d) * Ht + j] = format === 'f16' ? f16ToF32(rows[at + j]) : rows[at + j];
        }
        gpu.writeRows(table, d, out);
        d = end;
      }
      await gpu.sync();
    } catch (err) {
      gpu.release(table);
      throw err;
    }
    return new DraftHead(gpu, table);
  }

  destroy(): void {
    this.gpu.release(this.table);
  }
}
