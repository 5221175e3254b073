/**
 * The run's speculative-decoding measurement, before and after training: the target alone on the
 * held-out prompts (and some training prompts) gives the reference tokens and speed; a draft is then
 * scored by its acceptance length and tokens/s with those same prompts (lossless: its output must
 * equal the target's). After training the draft is the exported one, read back from `<out>/draft`,
 * so what is measured is what was written.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Eagle3DraftCheckpoint } from '../../inference/eagle3-drafter.ts';
import { evaluateDraft, type SpecEval } from '../../inference/evaluate-draft.ts';
import { timeTargetOnly, type SpeedReport } from '../../inference/speculative.ts';
import { readEagle3Export } from '../../model/eagle3/export.ts';
import type { TargetModel } from '../../model/target/model.ts';
import type { ProgressDisplay } from '../../ports/progress.ts';
import type { FileStore } from '../../ports/storage.ts';
import { exportRunCheckpoint, type ExportServing } from '../checkpoints/checkpoint-export.ts';
import type { TrainConfig } from './run-config.ts';

/** A draft's acceptance on the held-out prompts, and on training prompts when some are evaluated. */
export interface DraftEvals {
  heldOut: SpecEval;
  train?: SpecEval;
}

/** Scores drafts against the target-only reference of the same prompts. */
export interface DraftScorer {
  /** The target alone on the held-out prompts. */
  readonly base: { tokens: number[][]; speed: SpeedReport };
  /** `which` names the draft in the progress shown ('untrained', 'trained'). */
  evaluate(draft: Eagle3DraftCheckpoint, which: string): Promise<DraftEvals>;
}

/** Times the target alone (after a warm-up that compiles its pipelines), then returns the scorer over those prompts. */
export async function draftScorer(
  target: TargetModel,
  gpu: Gpu,
  config: Pick<TrainConfig, 'maxNewTokens' | 'numDraftTokens' | 'evalTrainPrompts'>,
  prompts: { heldPrompts: number[][]; evalTrainPrompts: number[][] },
  auxLayerIds: number[],
  now: () => number,
  progress?: ProgressDisplay,
): Promise<DraftScorer> {
  const heldPrompts = prompts.heldPrompts;
  const trainEval = prompts.evalTrainPrompts.slice(0, config.evalTrainPrompts);
  /** Runs `fn` with a progress bar over `total` prompts; `fn` reports prompts done. */
  const shown = async <T>(label: string, total: number, fn: (done: (n: number) => void) => Promise<T>): Promise<T> => {
    const bar = progress?.start({ label, total, unit: 'prompts' });
    try {
      const out = await fn((n) => bar?.update(n));
      bar?.update(total);
      return out;
    } finally {
      bar?.end();
    }
  };
  await timeTargetOnly(target, [heldPrompts[0]], 2, now); // warm-up: pipeline compilation
  const alone = (label: string, on: number[][]) =>
    shown(label, on.length, (done) => timeTargetOnly(target, on, config.maxNewTokens, now, undefined, undefined, done));
  const base = await alone('target alone, held-out prompts', heldPrompts);
  const baseTrain = trainEval.length > 0 ? await alone('target alone, training prompts', trainEval) : undefined;
  const evaluateOn = (label: string, draft: Eagle3DraftCheckpoint, on: number[][], reference: number[][]) =>
    shown(label, on.length, (done) =>
      evaluateDraft(target, gpu, draft, on, {
        maxNewTokens: config.maxNewTokens,
        numDraftTokens: config.numDraftTokens,
        auxLayerIds,
        reference,
        now,
        // A verification of prompt p means prompts before p are done.
        onVerify: (e) => done(e.prompt),
      }),
    );
  return {
    base,
    evaluate: async (draft, which) => ({
      heldOut: await evaluateOn(`speculative decoding, ${which} draft, held-out prompts`, draft, heldPrompts, base.tokens),
      train: baseTrain
        ? await evaluateOn(`speculative decoding, ${which} draft, training prompts`, draft, trainEval, baseTrain.tokens)
        : undefined,
    }),
  };
}

/**
 * Exports the run's final checkpoint as an SGLang draft in `<out>/draft`, by the function `speclab
 * export` uses (the two cannot differ), and reads it back as the draft to evaluate.
 */
export async function exportRunDraft(
  out: FileStore,
  auxLayerIds: number[],
): Promise<{ exportDir: string; trained: Eagle3DraftCheckpoint; serving: ExportServing }> {
  const { serving } = await exportRunCheckpoint(out, '', out, 'draft');
  // The evaluation's drafter reads the target's own embedding table on the GPU.
  const exported = await readEagle3Export(out, 'draft', 'none');
  const trained: Eagle3DraftCheckpoint = {
    config: exported.config,
    weights: exported.values,
    d2t: exported.vocab.d2t,
    auxLayerIds,
  };
  return { exportDir: `${out.root}/draft`, trained, serving };
}
