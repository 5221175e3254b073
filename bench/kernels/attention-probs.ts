/**
 * Attention-probability benchmark (src/kernels/attention-probs.ts): one TTT step of one sequence's
 * probabilities written out, at the draft shapes SpecLab trains (DRAFT_ATTENTION_SHAPES). Useful work
 * per visible entry: 2·hd for q·k plus the exp, counted as 2·hd + 1 flops; bytes moved (the sequence's
 * queries, its key slots, mask and lse read once, every entry of the step's [nH, S, W] slot written)
 * reported beside it, since at small head dims the kernel is bound by its writes.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { tttAttentionForward } from '../../src/kernels/attention.ts';
import { attentionProbs, probsWidth } from '../../src/kernels/attention-probs.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';
import { DRAFT_ATTENTION_SHAPES } from './attention.ts';

export async function benchAttentionProbs(gpu: Gpu, shapes = DRAFT_ATTENTION_SHAPES, reps = 5): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  for (const [name, { dims, tttStep }] of Object.entries(shapes)) {
    const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D } = dims;
    const slots = tttStep + 1;
    const rng = new Rng(37);
    const W = probsWidth(S, slots);
    const t = {
      q: gpu.upload([B * S, H * D], 'f32', rng.floats(B * S * H * D), 'q'),
      kCache: gpu.upload([slots, B, S, G, D], 'f32', rng.floats(slots * B * S * G * D), 'kCache'),
      vCache: gpu.upload([slots, B, S, G, D], 'f32', rng.floats(slots * B * S * G * D), 'vCache'),
      mask: gpu.upload([B, S], 'i32', new Int32Array(B * S).fill(1), 'mask'),
      o: gpu.tensor([B * S, H * D], 'f32', 'o'),
      lse: gpu.tensor([B, H, S], 'f32', 'lse'),
      probs: gpu.tensor([slots, H, S, W], 'f32', 'probs'),
    };
    const step = { ...dims, step: tttStep };
    // The probabilities read the forward's log-sum-exp, so the forward runs once first.
    await tttAttentionForward(gpu, t, step);
    const seconds = await medianSeconds(gpu, () => attentionProbs(gpu, t, { ...step, sample: 0, slots }), reps);
    const visible = H * ((S * (S + 1)) / 2 + S * tttStep);
    out.push({
      family: 'attention',
      variant: `probs-ttt${tttStep}`,
      shape: `${name}: S${S} H${H}/${G} hd${D} (1 of ${B} sequences)`,
      ms: seconds * 1e3,
      gflops: (visible * (2 * D + 1)) / seconds / 1e9,
      gbps: (4 * (H * S * W + S * H * D + slots * S * G * D + H * S + S)) / seconds / 1e9,
    });
    gpu.release(...Object.values(t));
  }
  return out;
}
