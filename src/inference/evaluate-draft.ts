/**
 * Evaluation of an EAGLE3 draft by speculative decoding against the target alone: acceptance length
 * (tokens per target verification, bonus included), decode tokens/s, and losslessness (the
 * speculative tokens must equal the target's greedy tokens exactly).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { TargetModel } from '../model/target/model.ts';
import { Eagle3Drafter, type Eagle3DraftCheckpoint } from './eagle3-drafter.ts';
import { Eagle3Proposer, timeSpeculative, type VerifyEvent } from './speculative.ts';

export interface SpecEval {
  acceptanceLength: number;
  verifications: number;
  acceptedDraftTokens: number;
  tokensPerSecond: number;
  lossless: boolean;
}

export interface EvaluateOptions {
  maxNewTokens: number;
  numDraftTokens: number;
  auxLayerIds: readonly number[];
  /** Target-only greedy tokens per prompt: the output must equal them. */
  reference: readonly (readonly number[])[];
  now: () => number;
  /** Called after every verification (the browser lab streams accepted tokens from it). */
  onVerify?: (event: VerifyEvent) => void;
}

export async function evaluateDraft(target: TargetModel, gpu: Gpu, draft: Eagle3DraftCheckpoint, prompts: readonly number[][], options: EvaluateOptions): Promise<SpecEval> {
  const drafter = new Eagle3Drafter(gpu, draft, target.weights.embedTokens);
  try {
    const spec = await timeSpeculative(
      target,
      new Eagle3Proposer(drafter),
      prompts,
      { maxNewTokens: options.maxNewTokens, numDraftTokens: options.numDraftTokens, auxLayerIds: options.auxLayerIds, onVerify: options.onVerify },
      options.now,
    );
    const r = spec.result;
    const lossless = options.reference.length === r.tokens.length && options.reference.every((t, i) => t.length === r.tokens[i].length && t.every((x, j) => x === r.tokens[i][j]));
    return { acceptanceLength: r.acceptanceLength, verifications: r.verifications, acceptedDraftTokens: r.acceptedDraftTokens, tokensPerSecond: spec.speed.tokensPerSecond, lossless };
  } finally {
    drafter.destroy();
  }
}
