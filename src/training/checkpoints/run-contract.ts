/**
 * The run contract of a training checkpoint (docs/durability.md §8): what must not change between
 * the run that saved a checkpoint and the run that resumes it, and the drift report a refused resume
 * names field by field.
 */
import type { OptimizerConfig } from '../../optim/adamw-backend.ts';

/** What must not change between the run that saved a checkpoint and the run that resumes it. */
export interface RunContract {
  readonly strategy: string;
  /** EAGLE3 TTT unroll length; null for strategies without one. */
  readonly tttLength: number | null;
  readonly batchSize: number;
  readonly accumulationSteps: number;
  /** `stableHash(config)` of the draft's config (or of any strategy-defining object). */
  readonly draftConfigHash: string;
  /** Hash of the run's own training data (every sequence's tokens and mask): prompts, prompt or response length change it. */
  readonly dataHash?: string;
}

/** Every field of `a` that differs from `b`, as "field: saved → now" lines. */
export function contractDrift(saved: RunContract, now: RunContract): string[] {
  const keys: (keyof RunContract)[] = ['strategy', 'tttLength', 'batchSize', 'accumulationSteps', 'draftConfigHash', 'dataHash'];
  const why: Partial<Record<keyof RunContract, string>> = {
    dataHash: ' (the training sequences differ: the prompts, the prompt length or the response length changed)',
  };
  return keys
    .filter((k) => saved[k] !== now[k])
    .map((k) => `${k}: checkpoint ${JSON.stringify(saved[k] ?? null)}, this run ${JSON.stringify(now[k] ?? null)}${why[k] ?? ''}`);
}

export function optimizerDrift(saved: OptimizerConfig, now: OptimizerConfig): string[] {
  const out: string[] = [];
  for (const k of ['lr', 'beta1', 'beta2', 'eps', 'weightDecay', 'maxGradNorm'] as const) {
    if (saved[k] !== now[k]) out.push(`optimizer.${k}: checkpoint ${saved[k]}, this run ${now[k]}`);
  }
  for (const k of ['kind', 'totalSteps', 'warmupRatio'] as const) {
    if (saved.schedule[k] !== now.schedule[k]) out.push(`schedule.${k}: checkpoint ${saved.schedule[k]}, this run ${now.schedule[k]}`);
  }
  return out;
}
