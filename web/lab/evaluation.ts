/**
 * Evaluation while training in the lab, as `speclab train --eval-every N` does: the held-out prompts
 * are continued by the target once when the session opens, and the draft is scored on them every
 * few optimizer steps (and at the last), so the page can chart held-out acceptance beside training.
 */
import type { TargetModel } from '../../src/model/target/model.ts';
import type { EvalMetrics } from '../../src/training/evaluation/held-out-eval.ts';
import type { PeriodicEvalSettings } from '../../src/training/evaluation/periodic-eval.ts';
import type { EvalReport, LabSettings } from './protocol.ts';
import { continueWithProgress, type OnProgress } from './worker-data.ts';

/** About this many evaluations per run: few enough to cost little, enough to draw a line. */
const EVALS_PER_RUN = 6;

/** The evaluation interval: a sixth of the run's optimizer steps (epochs × training rows / batch), at least 1. */
export function evalEvery(epochs: number, trainRows: number, batchSize: number): number {
  return Math.max(1, Math.ceil(Math.ceil((epochs * trainRows) / batchSize) / EVALS_PER_RUN));
}

/** The session's `evaluation` input: the held-out prompts continued greedily by the target. */
export async function labEvaluation(
  target: TargetModel,
  heldOut: readonly number[][],
  s: LabSettings,
  onProgress: OnProgress,
): Promise<PeriodicEvalSettings> {
  return {
    every: evalEvery(s.epochs, s.trainPrompts, s.batchSize),
    sequences: await continueWithProgress(target, heldOut, s.responseLength, onProgress),
  };
}

/** Plain structured-clone data for the page. */
export function evalReport(step: number, evaluation: PeriodicEvalSettings, m: EvalMetrics): EvalReport {
  return {
    step,
    every: evaluation.every,
    sequences: evaluation.sequences.length,
    lossTokens: m.lossTokens,
    loss: m.loss,
    plosses: [...m.plosses],
    accs: [...m.accs],
    acceptanceRates: [...m.acceptanceRates],
    simulatedAcceptance: m.simulatedAcceptance,
  };
}
