/**
 * `Eagle3TrainStrategy` (docs/training.md §4): the EAGLE3 draft family behind the branch-free trainer.
 *
 * Features (what SpecForge's online capture delivers, docs/features.md §8):
 *   input_ids       i32 [B, S]        already shifted left once
 *   attention_mask  i32 [B, S]
 *   loss_mask       i32 [B, S] or [B, S, 1], unshifted
 *   hidden_state    f32 [B, S, 3·Ht]  aux hidden states (the draft input)
 *   target          f32 [B, S, V]     full-vocab target logits, already shifted left once
 * With a `targetHead` (offline shards, metadata.targetRepr 'hidden_state'), `target` is instead the
 * target's final-normed hidden state f32 [B, S, Ht], shifted left once (see offline-eagle3.ts); the
 * head (the target's frozen lm_head, SpecForge's TargetHead) turns it into the logits above on the
 * GPU, one projection per micro-batch, freed once the step is encoded.
 * One forwardBackward = the draft's forward over the TTT unroll + backward, gradients × lossScale
 * added into the backend. Losses and metrics come back as pending reads; metrics are sums and
 * counts so the trainer can add them across micro-batches (HEAD's numerator/denominator reduction):
 *   ploss_k, ploss_num_k = ploss_k · n, ploss_den_k = n (n = B·S, SpecForge's per-step denominator),
 *   correct_k, denom_k        (acc_k = Σcorrect / max(Σdenom, 1e-6)),
 *   accept_sum_k, accept_count_k (acceptance_rate_k = Σsum / max(Σcount, 1e-8)).
 */
import type { TrainBatch } from '../../contracts/index.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { fmtShape, type Tensor } from '../../gpu/tensor.ts';
import { checkEagle3Inputs, type Eagle3Inputs } from '../../model/eagle3/forward.ts';
import type { Eagle3DraftModel } from '../../model/eagle3/model.ts';
import { requireFeatures, type DraftTrainStrategy, type StepOutput } from '../strategy.ts';

export const EAGLE3_FEATURES = ['input_ids', 'attention_mask', 'loss_mask', 'hidden_state', 'target'] as const;

/** Full-vocab logits [..., V] from the target's final-normed hidden state [..., Ht] (TargetModel.headLogits). */
export interface TargetHead {
  readonly gpu: Gpu;
  headLogits(hidden: Tensor): Promise<Tensor>;
}

export interface Eagle3StrategyOptions {
  /** TTT unroll length L (SpecForge default 7). */
  tttLength: number;
  /** Projects batches whose target is the target's hidden state; without it such batches are refused. */
  targetHead?: TargetHead;
}

export class Eagle3TrainStrategy implements DraftTrainStrategy {
  readonly name = 'eagle3';
  readonly requiredFeatures = EAGLE3_FEATURES;
  readonly tttLength: number;
  private readonly targetHead?: TargetHead;

  constructor(readonly model: Eagle3DraftModel, options: Eagle3StrategyOptions) {
    if (!Number.isInteger(options.tttLength) || options.tttLength < 1) throw new RangeError(`${this.name}: tttLength must be a positive integer, got ${options.tttLength}`);
    this.tttLength = options.tttLength;
    this.targetHead = options.targetHead;
  }

  validateBatch(batch: TrainBatch<Tensor>): void {
    requireFeatures(this.name, batch, this.requiredFeatures);
    const ttt = batch.metadata.tttLength;
    if (ttt !== undefined && ttt !== this.tttLength) throw new Error(`${this.name}: batch asks for TTT length ${ttt}, the strategy runs ${this.tttLength}`);
    if (this.needsHead(batch)) {
      const target = batch.tensors.target;
      const Ht = this.model.config.targetHiddenSize;
      const [B, S] = batch.tensors.input_ids.shape;
      if (target.dtype !== 'f32' || target.shape.length !== 3 || target.shape[0] !== B || target.shape[1] !== S || target.shape[2] !== Ht) {
        throw new Error(`${this.name}: batch [${batch.sampleIds.join(', ')}] target (the target's hidden state) must be f32 [${B}, ${S}, ${Ht}], got ${target.dtype}${fmtShape(target.shape)}`);
      }
      // The other inputs are checked with the projected logits by the draft's forward.
      return;
    }
    checkEagle3Inputs(this.model.config, this.inputsOf(batch));
  }

  async forwardBackward(batch: TrainBatch<Tensor>, lossScale: number): Promise<StepOutput> {
    const L = this.tttLength;
    const logits = this.needsHead(batch) ? await this.targetHead!.headLogits(batch.tensors.target) : undefined;
    let out;
    try {
      out = await this.model.trainStep({ ...this.inputsOf(batch), ...(logits ? { target: logits } : {}) }, { tttLength: L, lossScale });
    } finally {
      // The step's dispatches are encoded; later reuse of this buffer is ordered after them.
      if (logits) this.targetHead!.gpu.release(logits);
    }
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

  /** True for a hidden-state target; throws naming the batch when no head is configured for it. */
  private needsHead(batch: TrainBatch<Tensor>): boolean {
    if (batch.metadata.targetRepr !== 'hidden_state') return false;
    if (!this.targetHead) {
      throw new Error(`${this.name}: batch [${batch.sampleIds.join(', ')}] carries the target's hidden state; this strategy needs full-vocab target logits (no target head is configured)`);
    }
    return true;
  }

  private inputsOf(batch: TrainBatch<Tensor>): Eagle3Inputs {
    const t = batch.tensors;
    return { inputIds: t.input_ids, attentionMask: t.attention_mask, lossMask: t.loss_mask, hiddenStates: t.hidden_state, target: t.target };
  }
}
