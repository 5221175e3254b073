/**
 * The two numbers per position that compact features keep of the target's full-vocabulary logits:
 * their logsumexp and their argmax (kernels/teacher.ts `targetStats`), from the target's final-normed
 * hidden state. The logits are made a chunk of rows at a time (as many as one binding holds) and
 * dropped once their statistics are taken, so no [rows, V] tensor exists. The rollout's capture
 * (inference/target-feature-source.ts) sends them; the offline trainer makes them from a shard's
 * hidden state (training/strategies/eagle3.ts).
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { copyRows } from '../../gpu/tensor-views.ts';
import { targetStats } from '../../kernels/teacher.ts';

/** What the statistics need of the target: its lm_head (TargetModel.headLogits) and its sizes. */
export interface FullVocabHead {
  readonly gpu: Gpu;
  readonly config: { readonly hiddenSize: number; readonly vocabSize: number };
  headLogits(hidden: Tensor): Promise<Tensor>;
}

/** lse f32 [rows] and tok i32 [rows] for `hidden` [..., H] f32 holding `rows` rows. The caller owns the two tensors. */
export async function headRowStats(head: FullVocabHead, hidden: Tensor, rows: number): Promise<{ lse: Tensor; tok: Tensor }> {
  const gpu = head.gpu;
  const { hiddenSize: H, vocabSize: V } = head.config;
  const chunk = Math.max(1, Math.min(rows, Math.floor(gpu.maxBindingBytes / (V * 4))));
  const lse = gpu.tensor([rows], 'f32', 'target_lse');
  const tok = gpu.tensor([rows], 'i32', 'target_tok');
  try {
    for (let r = 0; r < rows; r += chunk) {
      // Every chunk has `chunk` rows, the last one ending at `rows` (overlapping its predecessor, whose rows
      // it computes again to the same bits): one size class for every chunk's buffers, never two.
      const r0 = Math.min(r, rows - chunk);
      const h = gpu.tensor([chunk, H], 'f32', 'stats.hidden');
      const l = gpu.tensor([chunk], 'f32', 'stats.lse');
      const k = gpu.tensor([chunk], 'i32', 'stats.tok');
      let logits: Tensor | undefined;
      try {
        copyRows(gpu, hidden, r0, h, 0, chunk);
        logits = await head.headLogits(h);
        await targetStats(gpu, { logits, lse: l, tok: k }, { rows: chunk, vocab: V });
        copyRows(gpu, l, 0, lse, r0, chunk);
        copyRows(gpu, k, 0, tok, r0, chunk);
      } finally {
        gpu.release(h, l, k, ...(logits ? [logits] : []));
      }
    }
  } catch (err) {
    gpu.release(lse, tok);
    throw err;
  }
  return { lse, tok };
}
