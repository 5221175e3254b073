/**
 * `Eagle3DraftModel`: the LlamaForCausalLMEagle3 draft on the GPU (docs/eagle3.md §2–§6) as one
 * training operation — forward over the TTT unroll, per-step losses and metrics, and the backward,
 * with gradients (times the loss scale) added into the AdamWBackend's grad buffers. The optimizer
 * step stays with the backend, so accumulation and clipping work as for any strategy.
 *
 * Module map: inputs.ts (the micro-batch and its check), parameters.ts (GPU tensors), forward.ts (the
 * forward, training and gradient-free), forward-state.ts (what the backward reads), backward.ts,
 * lm-head.ts, rope.ts, vocab-mapping.ts, export.ts; the config is src/config/eagle3-config.ts.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { AdamWBackend } from '../../optim/adamw-backend.ts';
import { eagle3Backward } from './backward.ts';
import type { Eagle3Config } from '../../config/eagle3-config.ts';
import { eagle3Forward } from './forward.ts';
import { readUnrollResults, releaseForwardState } from './forward-state.ts';
import type { Eagle3Inputs } from './inputs.ts';
import { Eagle3Parameters, type Eagle3Frozen, type Eagle3Vocab } from './parameters.ts';

export interface Eagle3TrainOptions {
  tttLength: number;
  /** Gradient multiplier, e.g. 1 / accumulation steps. */
  lossScale: number;
  /** Also read back each step's logits and hidden output. */
  capture?: boolean;
  /** Activation recompute: keep two [R, H] tensors per TTT step and encode each step's body again in the backward (same bits). */
  recompute?: boolean;
  /** Rows per chunk of each step's head (step-head.ts); default: all rows when [R, D] f32 fits one binding. */
  headChunkRows?: number;
  /** Rows per chunk of each step's MLP (mlp-chunks.ts); default: all rows when the packed gate | up [R, 2I] f32 fits one binding. */
  mlpChunkRows?: number;
  /** false: one head per step even where the heads would run batched (step-heads-batched.ts). Default true. */
  batchHeads?: boolean;
}

export interface Eagle3TrainOutput {
  /** [L + 1]: ploss_0..ploss_{L−1}, total = Σ 0.8ᵏ ploss_k (unscaled). */
  losses: Promise<Float32Array>;
  /** [4·L]: per step correct, denom, acceptSum, acceptCount. */
  metricSums: Promise<Float32Array>;
  /** B·S: SpecForge's per-step loss denominator (for numerator/denominator reductions). */
  lossDenominator: number;
  stepLogits?: Promise<Float32Array>[];
  stepHidden?: Promise<Float32Array>[];
}

export class Eagle3DraftModel {
  readonly params: Eagle3Parameters;

  constructor(
    private readonly gpu: Gpu,
    backend: AdamWBackend,
    readonly config: Eagle3Config,
    values: Readonly<Record<string, ArrayLike<number>>>,
    vocab: Eagle3Vocab,
    frozen: Eagle3Frozen = {},
  ) {
    this.params = new Eagle3Parameters(gpu, backend, config, values, vocab, frozen);
  }

  /** Forward + backward of one micro-batch; everything is encoded, results come back as pending reads. */
  async trainStep(inputs: Eagle3Inputs, options: Eagle3TrainOptions): Promise<Eagle3TrainOutput> {
    const state = await eagle3Forward(this.gpu, this.params, inputs, options);
    await eagle3Backward(this.gpu, this.params, state);
    const out: Eagle3TrainOutput = {
      ...readUnrollResults(this.gpu, state),
      lossDenominator: state.dims.rows,
      stepLogits: state.captured?.logits,
      stepHidden: state.captured?.hidden,
    };
    // Reads are queued before the release, and any reuse of these buffers is ordered after them.
    releaseForwardState(this.gpu, state);
    return out;
  }

  destroy(): void {
    this.params.destroy();
  }
}
