/**
 * `Eagle3TrainStrategy` (reference spec §5.4): the EAGLE3 draft family behind the branch-free trainer.
 *
 * Features (what SpecForge's online capture delivers, §4.4; the offline path's target-head projection
 * is not implemented here, so batches must carry logits):
 *   input_ids       i32 [B, S]        already shifted left once
 *   attention_mask  i32 [B, S]
 *   loss_mask       i32 [B, S] or [B, S, 1], unshifted
 *   hidden_state    f32 [B, S, 3·Ht]  aux hidden states (the draft input)
 *   target          f32 [B, S, V]     full-vocab target logits, already shifted left once
 * One forwardBackward = the draft's forward over the TTT unroll + backward, gradients × lossScale
 * added into the backend. Losses and metrics come back as pending reads; metrics are sums and
 * counts so the trainer can add them across micro-batches (HEAD's numerator/denominator reduction):
 *   ploss_k, ploss_num_k = ploss_k · n, ploss_den_k = n (n = B·S, SpecForge's per-step denominator),
 *   correct_k, denom_k        (acc_k = Σcorrect / max(Σdenom, 1e-6)),
 *   accept_sum_k, accept_count_k (acceptance_rate_k = Σsum / max(Σcount, 1e-8)).
 */
import type { TrainBatch } from '../../contracts/index.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { checkEagle3Inputs, type Eagle3Inputs } from '../../model/eagle3/forward.ts';
import type { Eagle3DraftModel } from '../../model/eagle3/model.ts';
import { requireFeatures, type DraftTrainStrategy, type StepOutput } from '../strategy.ts';

export const EAGLE3_FEATURES = ['input_ids', 'attention_mask', 'loss_mask', 'hidden_state', 'target'] as const;

export interface Eagle3StrategyOptions {
  /** TTT unroll length L (SpecForge default 7). */
  tttLength: number;
}

export class Eagle3TrainStrategy implements DraftTrainStrategy {
  readonly name = 'eagle3';
  readonly requiredFeatures = EAGLE3_FEATURES;
  readonly tttLength: number;

  constructor(readonly model: Eagle3DraftModel, options: Eagle3StrategyOptions) {
    if (!Number.isInteger(options.tttLength) || options.tttLength < 1) throw new RangeError(`${this.name}: tttLength must be a positive integer, got ${options.tttLength}`);
    this.tttLength = options.tttLength;
  }

  validateBatch(batch: TrainBatch<Tensor>): void {
    requireFeatures(this.name, batch, this.requiredFeatures);
    const repr = batch.metadata.targetRepr;
    if (repr === 'hidden_state') {
      throw new Error(`${this.name}: batch [${batch.sampleIds.join(', ')}] carries the target's hidden state; this strategy needs full-vocab target logits (no target head is configured)`);
    }
    const ttt = batch.metadata.tttLength;
    if (ttt !== undefined && ttt !== this.tttLength) throw new Error(`${this.name}: batch asks for TTT length ${ttt}, the strategy runs ${this.tttLength}`);
    checkEagle3Inputs(this.model.config, this.inputsOf(batch));
  }

  async forwardBackward(batch: TrainBatch<Tensor>, lossScale: number): Promise<StepOutput> {
    const L = this.tttLength;
    const out = await this.model.trainStep(this.inputsOf(batch), { tttLength: L, lossScale });
    const n = out.lossDenominator;
    const metrics = Promise.all([out.losses, out.metricSums]).then(([losses, sums]) => {
      const m: Record<string, number> = {};
      for (let k = 0; k < L; k++) {
        m[`ploss_${k}`] = losses[k];
        m[`ploss_num_${k}`] = losses[k] * n;
        m[`ploss_den_${k}`] = n;
        m[`correct_${k}`] = sums[4 * k];
        m[`denom_${k}`] = sums[4 * k + 1];
        m[`accept_sum_${k}`] = sums[4 * k + 2];
        m[`accept_count_${k}`] = sums[4 * k + 3];
      }
      return m;
    });
    return { loss: out.losses.then((l) => l[L]), metrics };
  }

  private inputsOf(batch: TrainBatch<Tensor>): Eagle3Inputs {
    const t = batch.tensors;
    return { inputIds: t.input_ids, attentionMask: t.attention_mask, lossMask: t.loss_mask, hiddenStates: t.hidden_state, target: t.target };
  }
}
