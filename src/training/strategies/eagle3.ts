/**
 * `Eagle3TrainStrategy` (docs/training.md §4): the EAGLE3 draft family behind the branch-free trainer.
 *
 * Features (what SpecForge's online capture delivers, docs/features.md §8):
 *   input_ids       i32 [B, S]        already shifted left once
 *   attention_mask  i32 [B, S]
 *   loss_mask       i32 [B, S] or [B, S, 1], unshifted
 *   hidden_state    f32 [B, S, 3·Ht]  aux hidden states (the draft input)
 *   target          f32 [B, S, V]     full-vocab target logits, already shifted left once
 * Compact features (metadata.targetRepr 'hidden_state' with target_lse and target_tok, what online
 * runs capture by default): `target` is the target's final-normed hidden state [B, S, Ht] shifted left
 * once, with target_lse f32 [B, S] and target_tok i32 [B, S] (the full-vocabulary logsumexp and argmax
 * at the same positions); the `draftHead` (the lm_head rows of the draft vocabulary) turns `target` into
 * the target's logits of the D draft tokens and the teacher is built from those three
 * (kernels/teacher.ts buildTeacherPruned): no [.., V] tensor is ever made.
 * With a `targetHead` (offline shards: 'hidden_state' without target_lse), `target` is the same hidden
 * state and the head (the target's frozen lm_head, SpecForge's TargetHead) turns it into the full
 * logits above on the GPU, one projection per micro-batch, freed once the step is encoded.
 * `hidden_state` and `target` may also arrive as f16 (features stored with --feature-precision f16).
 * The draft reads f16 `hidden_state` and a compact target's f16 hidden state itself, widening a row
 * chunk at a time (model/eagle3/fc-chunks.ts), so no f32 copy of the batch exists; full-vocabulary
 * logits and an offline hidden-state target are widened whole right before the head and the forward
 * (feature-precision.ts), and the widened copies are freed once the step is encoded.
 * One forwardBackward = the draft's forward over the TTT unroll + backward, gradients × lossScale
 * added into the backend. `evaluate` = the same forward, losses and metrics with no gradient at all
 * (SpecForge's eval forward under no_grad; the gradient-free mode of model/eagle3/forward.ts).
 * Losses and metrics come back as pending reads; metrics are sums and counts so the trainer can add
 * them across micro-batches (the numerator/denominator reduction of SpecForge's later runtime):
 *   ploss_k, ploss_num_k = ploss_k · n, ploss_den_k = n (n = B·S, SpecForge's per-step denominator),
 *   correct_k, denom_k        (acc_k = Σcorrect / max(Σdenom, 1e-6)),
 *   accept_sum_k, accept_count_k (acceptance_rate_k = Σsum / max(Σcount, 1e-8) within one batch),
 *   accept_rate_num_k = acceptance_rate_k · n (across batches SpecForge weights each batch's rate by
 *                        its n: Σ accept_rate_num_k / Σ ploss_den_k, controller.py _reduce_eagle3_metrics).
 */
import type { TrainBatch } from '../../contracts/index.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { fmtShape, Tensor } from '../../gpu/tensor.ts';
import { eagle3EvalForward, type Eagle3EvalTaps } from '../../model/eagle3/forward.ts';
import { checkEagle3Inputs, type Eagle3Inputs } from '../../model/eagle3/inputs.ts';
import type { Eagle3DraftModel } from '../../model/eagle3/model.ts';
import { headRowStats, type FullVocabHead } from '../../model/target/head-stats.ts';
import { asWidened, widenF16Features, WIDENED_FEATURES } from '../loop/feature-precision.ts';
import { requireFeatures, type DraftTrainStrategy, type StepOutput } from '../loop/strategy.ts';

export const EAGLE3_FEATURES = ['input_ids', 'attention_mask', 'loss_mask', 'hidden_state', 'target'] as const;

/** Full-vocab logits [..., V] from the target's final-normed hidden state [..., Ht] (TargetModel.headLogits), and its sizes. */
export type TargetHead = FullVocabHead;

/** The target's lm_head rows of the draft tokens, f32 [D, Ht] (model/target/draft-head.ts); the forward projects with it. */
export interface DraftTargetHead {
  readonly table: Tensor;
}

export interface Eagle3StrategyOptions {
  /** TTT unroll length L (SpecForge default 7). */
  tttLength: number;
  /**
   * Projects offline batches (the target's hidden state, no target_lse) to full logits; without it
   * such batches are refused. With a `draftHead` too, such a batch is made compact instead: the
   * full-vocabulary logsumexp and argmax from this head a binding's worth of rows at a time
   * (model/target/head-stats.ts), the draft tokens' logits from the draft head; no [B, S, V] tensor.
   */
  targetHead?: TargetHead;
  /** The head of compact batches (with target_lse and target_tok): the draft tokens' logits are hidden · tableᵀ; without it such batches are refused. */
  draftHead?: DraftTargetHead;
  /** The draft's Gpu; needed by `evaluate` only (the model keeps its own private). */
  gpu?: Gpu;
  /** Activation recompute in the backward (model/eagle3/step-body.ts): same bits, less memory. */
  recompute?: boolean;
}

/** The strategy's metric record from one batch's read-back losses [L + 1] and sums [4·L]. */
export function eagle3StepMetrics(losses: ArrayLike<number>, sums: ArrayLike<number>, n: number, L: number): Record<string, number> {
  const m: Record<string, number> = {};
  for (let k = 0; k < L; k++) {
    m[`ploss_${k}`] = losses[k];
    m[`ploss_num_${k}`] = losses[k] * n;
    m[`ploss_den_${k}`] = n;
    m[`correct_${k}`] = sums[4 * k];
    m[`denom_${k}`] = sums[4 * k + 1];
    m[`accept_sum_${k}`] = sums[4 * k + 2];
    m[`accept_count_${k}`] = sums[4 * k + 3];
    m[`accept_rate_num_${k}`] = (sums[4 * k + 2] / Math.max(sums[4 * k + 3], 1e-8)) * n;
  }
  return m;
}

export class Eagle3TrainStrategy implements DraftTrainStrategy {
  readonly name = 'eagle3';
  readonly requiredFeatures = EAGLE3_FEATURES;
  readonly tttLength: number;
  private readonly targetHead?: TargetHead;
  private readonly draftHead?: DraftTargetHead;
  private readonly recompute: boolean;
  private readonly gpu?: Gpu;

  constructor(
    readonly model: Eagle3DraftModel,
    options: Eagle3StrategyOptions,
  ) {
    if (!Number.isInteger(options.tttLength) || options.tttLength < 1)
      throw new RangeError(`${this.name}: tttLength must be a positive integer, got ${options.tttLength}`);
    this.tttLength = options.tttLength;
    this.targetHead = options.targetHead;
    this.draftHead = options.draftHead;
    this.recompute = options.recompute ?? false;
    this.gpu = options.gpu ?? options.targetHead?.gpu;
  }

  validateBatch(batch: TrainBatch<Tensor>): void {
    requireFeatures(this.name, batch, this.requiredFeatures);
    const ttt = batch.metadata.tttLength;
    if (ttt !== undefined && ttt !== this.tttLength)
      throw new Error(`${this.name}: batch asks for TTT length ${ttt}, the strategy runs ${this.tttLength}`);
    if (this.isCompact(batch)) {
      this.checkHiddenTarget(batch);
      const t = batch.tensors;
      const [B, S] = t.input_ids.shape;
      for (const [name, dtype] of [
        ['target_lse', 'f32'],
        ['target_tok', 'i32'],
      ] as const) {
        if (t[name].dtype !== dtype || t[name].shape.join() !== `${B},${S}`)
          throw new Error(
            `${this.name}: batch [${batch.sampleIds.join(', ')}] ${name} must be ${dtype} [${B}, ${S}], got ${t[name].dtype}${fmtShape(t[name].shape)}`,
          );
      }
      return;
    }
    if (this.needsHead(batch)) {
      this.checkHiddenTarget(batch);
      // The other inputs are checked with the projected logits by the draft's forward.
      return;
    }
    // f16 features are checked as the f32 tensors they are widened to before the forward.
    for (const name of WIDENED_FEATURES) {
      const t = batch.tensors[name];
      if (t.dtype !== 'f32' && t.dtype !== 'f16')
        throw new Error(`${this.name}: batch [${batch.sampleIds.join(', ')}] ${name} must be f32 or f16, got ${t.dtype}`);
    }
    const x = this.inputsOf(batch);
    checkEagle3Inputs(this.model.config, { ...x, hiddenStates: asWidened(x.hiddenStates), target: asWidened(x.target as Tensor) });
  }

  /** A batch's `target` that holds the target's hidden state: f32 or f16 [B, S, Ht]. */
  private checkHiddenTarget(batch: TrainBatch<Tensor>): void {
    const target = batch.tensors.target;
    const Ht = this.model.config.targetHiddenSize;
    const [B, S] = batch.tensors.input_ids.shape;
    if (
      (target.dtype !== 'f32' && target.dtype !== 'f16') ||
      target.shape.length !== 3 ||
      target.shape[0] !== B ||
      target.shape[1] !== S ||
      target.shape[2] !== Ht
    ) {
      throw new Error(
        `${this.name}: batch [${batch.sampleIds.join(', ')}] target (the target's hidden state) must be f32 or f16 [${B}, ${S}, ${Ht}], got ${target.dtype}${fmtShape(target.shape)}`,
      );
    }
  }

  async forwardBackward(batch: TrainBatch<Tensor>, lossScale: number): Promise<StepOutput> {
    const L = this.tttLength;
    const out = await this.withTargetLogits(batch, (inputs) =>
      this.model.trainStep(inputs, { tttLength: L, lossScale, recompute: this.recompute }),
    );
    const n = out.lossDenominator;
    const metrics = Promise.all([out.losses, out.metricSums]).then(([losses, sums]) => eagle3StepMetrics(losses, sums, n, L));
    return { loss: out.losses.then((l) => l[L]), metrics };
  }

  /**
   * The forward of `forwardBackward` over the TTT unroll with its loss and metric kernels, and no
   * backward: no gradient is computed or written, the weights are only read. Same loss and metrics.
   * `taps` read tensors of the forward as it runs (model/eagle3/forward.ts `Eagle3EvalTaps`; the lab's draft insight).
   */
  async evaluate(batch: TrainBatch<Tensor>, taps?: Eagle3EvalTaps): Promise<StepOutput> {
    const gpu = this.gpu;
    if (!gpu) throw new Error(`${this.name}: evaluate needs the draft's Gpu (pass { gpu } to the strategy)`);
    const L = this.tttLength;
    const out = await this.withTargetLogits(batch, (inputs) => eagle3EvalForward(gpu, this.model.params, inputs, L, taps));
    const metrics = Promise.all([out.losses, out.metricSums]).then(([losses, sums]) =>
      eagle3StepMetrics(losses, sums, out.lossDenominator, L),
    );
    return { loss: out.losses.then((l) => l[L]), metrics };
  }

  /**
   * Runs `fn` on the batch's inputs, with the teacher's source made from a hidden-state target: the
   * compact form (the hidden state with the draft rows of lm_head; the forward forms the draft tokens'
   * logits a row window at a time) or the full logits (offline batches without a draft head).
   */
  private async withTargetLogits<T>(batch: TrainBatch<Tensor>, fn: (inputs: Eagle3Inputs) => Promise<T>): Promise<T> {
    const compact = this.isCompact(batch);
    const needsHead = !compact && this.needsHead(batch);
    // The draft widens hidden_state and a compact target itself, a row chunk at a time (fc-chunks.ts).
    const widened = compact ? [] : ['target'];
    const wide = await widenF16Features(this.gpu, batch.tensors, widened, `${this.name}: batch [${batch.sampleIds.join(', ')}]`);
    let logits: Tensor | undefined;
    try {
      const x = this.inputsOf({ ...batch, tensors: wide.tensors });
      if (compact) {
        const head = this.draftHead!.table;
        return await fn({
          ...x,
          target: { hidden: wide.tensors.target, head, lse: batch.tensors.target_lse, tok: batch.tensors.target_tok },
        });
      }
      if (needsHead && this.draftHead) {
        // An offline batch made compact on the trainer: the teacher from the draft columns, lse and argmax.
        const [B, S] = batch.tensors.input_ids.shape;
        const stats = await headRowStats(this.targetHead!, wide.tensors.target, B * S);
        try {
          const head = this.draftHead.table;
          // [B·S] as [B, S]: the same parts, whose rows are the B·S rows of both shapes.
          const asBatch = (t: Tensor) => new Tensor([B, S], t.dtype, t.parts, t.label, 2);
          return await fn({ ...x, target: { hidden: wide.tensors.target, head, lse: asBatch(stats.lse), tok: asBatch(stats.tok) } });
        } finally {
          this.gpu!.release(stats.lse, stats.tok);
        }
      }
      logits = needsHead ? await this.targetHead!.headLogits(wide.tensors.target) : undefined;
      return await fn({ ...x, ...(logits ? { target: logits } : {}) });
    } finally {
      // The step's dispatches are encoded; later reuse of these buffers is ordered after them.
      if (logits) this.gpu!.release(logits);
      if (wide.made.length > 0) this.gpu!.release(...wide.made);
    }
  }

  /** True for compact features (target_lse beside a hidden-state target); throws naming the batch when no draft head is configured. */
  private isCompact(batch: TrainBatch<Tensor>): boolean {
    if (batch.metadata.targetRepr !== 'hidden_state' || !('target_lse' in batch.tensors)) return false;
    if (!this.draftHead)
      throw new Error(
        `${this.name}: batch [${batch.sampleIds.join(', ')}] carries compact target features; this strategy has no draft head (the target's lm_head rows of the draft vocabulary)`,
      );
    return true;
  }

  /** True for a hidden-state target; throws naming the batch when no head is configured for it. */
  private needsHead(batch: TrainBatch<Tensor>): boolean {
    if (batch.metadata.targetRepr !== 'hidden_state') return false;
    if (!this.targetHead) {
      throw new Error(
        `${this.name}: batch [${batch.sampleIds.join(', ')}] carries the target's hidden state; this strategy needs full-vocab target logits (no target head is configured)`,
      );
    }
    return true;
  }

  private inputsOf(batch: TrainBatch<Tensor>): Eagle3Inputs {
    const t = batch.tensors;
    return {
      inputIds: t.input_ids,
      attentionMask: t.attention_mask,
      lossMask: t.loss_mask,
      hiddenStates: t.hidden_state,
      target: t.target,
    };
  }
}
