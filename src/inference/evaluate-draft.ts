/**
 * Evaluation of an EAGLE3 draft by speculative decoding against the target alone: acceptance length
 * (tokens per target verification, bonus included), decode tokens/s, and losslessness (greedy: the
 * speculative tokens must equal the target's greedy tokens exactly; sampled: the rejection rule makes
 * the output distributed as target-only sampling, proven statistically by
 * test/inference/speculative-sampling.test.ts, so one run has no tokens to compare).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { TargetModel } from '../model/target/model.ts';
import { Eagle3Proposer } from './draft-proposer.ts';
import { Eagle3Drafter, type Eagle3DraftCheckpoint } from './eagle3-drafter.ts';
import { isSampling, type SpeculativeSampling } from './speculative-sampling.ts';
import { timeSpeculative, type VerifyEvent } from './speculative.ts';

export interface SpecEval {
  acceptanceLength: number;
  verifications: number;
  acceptedDraftTokens: number;
  tokensPerSecond: number;
  /** Greedy: the tokens equal the reference. Sampled: undefined (one run proves nothing either way). */
  lossless: boolean | undefined;
}

export interface EvaluateOptions {
  maxNewTokens: number;
  numDraftTokens: number;
  auxLayerIds: readonly number[];
  /** Target-only greedy tokens per prompt: the greedy output must equal them (unused when sampling). */
  reference: readonly (readonly number[])[];
  /** Temperature, top-p, top-k and seed of speculative sampling; absent or temperature 0 = greedy. */
  sampling?: SpeculativeSampling;
  now: () => number;
  /** Called after every verification (the browser lab streams accepted tokens from it). */
  onVerify?: (event: VerifyEvent) => void;
}

export async function evaluateDraft(
  target: TargetModel,
  gpu: Gpu,
  draft: Eagle3DraftCheckpoint,
  prompts: readonly number[][],
  options: EvaluateOptions,
): Promise<SpecEval> {
  const drafter = new Eagle3Drafter(gpu, draft, target.weights.embedTokens);
  try {
    const spec = await timeSpeculative(
      target,
      new Eagle3Proposer(drafter),
      prompts,
      {
        maxNewTokens: options.maxNewTokens,
        numDraftTokens: options.numDraftTokens,
        auxLayerIds: options.auxLayerIds,
        onVerify: options.onVerify,
        sampling: options.sampling,
      },
      options.now,
    );
    const r = spec.result;
    const lossless = isSampling(options.sampling)
      ? undefined
      : options.reference.length === r.tokens.length &&
        options.reference.every((t, i) => t.length === r.tokens[i].length && t.every((x, j) => x === r.tokens[i][j]));
    return {
      acceptanceLength: r.acceptanceLength,
      verifications: r.verifications,
      acceptedDraftTokens: r.acceptedDraftTokens,
      tokensPerSecond: spec.speed.tokensPerSecond,
      lossless,
    };
  } finally {
    drafter.destroy();
    gpu.trimPool(); // the drafter's weights and every prompt's buffers (Gpu.trimPool)
  }
}
