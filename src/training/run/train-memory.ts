/**
 * The GPU memory plan of `speclab train` (src/training/run/memory-plan.ts), from the settings, the
 * target's config and the training data, computed before anything is allocated on the GPU and
 * before the run folder is touched. A run that cannot fit — over --gpu-memory-budget, or with a
 * tensor no binding of this adapter can hold — is refused as a usage error (exit code 2) whose one
 * line names the plan's largest item, the total, the budget and what to lower.
 */
import { z } from 'zod';
import type { TargetModelConfig } from '../../config/hf-config.ts';
import { draftConfigFor } from '../sequences/eagle3-data.ts';
import {
  formatMemoryPlan,
  memoryPlanRefusal,
  sessionMemoryInput,
  type AdapterLimits,
  type MemoryPlan,
  type Precision,
} from './memory-plan.ts';
import { planWithRecompute } from './memory-plan-roles.ts';
import { formatBytes, parseByteSize } from '../../util/bytes.ts';
import { UsageError } from '../../util/usage-error.ts';
import type { TrainData } from './train-data.ts';

/** --gpu-memory-budget in bytes: a flag's "8GB" arrives parsed; a config file may give either form. */
export const gpuMemoryBudgetSchema = z
  .union([z.number(), z.string()])
  .transform((value, ctx) => {
    try {
      if (typeof value === 'string') return parseByteSize(value, 'gpuMemoryBudget');
      if (!Number.isSafeInteger(value) || value < 1) throw new Error(`gpuMemoryBudget: ${value} is not a positive whole number of bytes`);
      return value;
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
      return z.NEVER;
    }
  })
  .optional();

export interface TrainMemorySettings {
  readonly batchSize: number;
  readonly tttLength: number;
  readonly roundPrompts: number;
  readonly responseLength: number;
  readonly featurePrecision?: Precision;
  readonly targetPrecision?: Precision;
  readonly gpuMemoryBudget?: number;
  /** Steps between periodic held-out evaluations (0: none): the held-out batches stay on the GPU. */
  readonly evalEvery: number;
  /** A cluster run's trainer (`--cluster`): planned as the trainer role. */
  readonly cluster?: string;
  /** --recompute: 'auto' plans with kept activations and turns recompute on only if that is what makes the plan fit. */
  readonly recompute?: 'auto' | 'on' | 'off';
}

/** Tokens of the longest training sequence: a dataset row as given, a regenerated one at its longest, or a prompt plus its reply. */
export function longestTrainSequence(data: TrainData, responseLength: number): number {
  if (data.trainSequences) return Math.max(...data.trainSequences.map((s) => s.inputIds.length));
  if (data.regenerate) {
    return Math.max(
      ...data.regenerate.map((s) => {
        const replies = s.lossMask.filter((v, j) => v === 1 && (j === 0 || s.lossMask[j - 1] === 0)).length;
        return s.lossMask.filter((v) => v === 0).length + replies * responseLength;
      }),
    );
  }
  return Math.max(...(data.trainPrompts ?? [[]]).map((p) => p.length)) + responseLength;
}

/**
 * The plan of this run on an adapter with `limits`: the colocated plan, or with `--cluster` the
 * trainer's (./memory-plan-roles.ts: no capture activations, no resident round).
 */
export function trainMemoryPlan(
  config: TrainMemorySettings,
  tc: TargetModelConfig,
  draftVocabSize: number,
  data: TrainData,
  limits: AdapterLimits,
): MemoryPlan {
  const sequences = data.trainSequences?.length ?? data.regenerate?.length ?? data.trainPrompts?.length ?? 1;
  // The target always generates for the acceptance measurement (one prompt at a time), the held-out replies unless
  // the held-out rows bring theirs, and the training data unless a dataset brings its replies (in batches).
  const heldGenerated = data.heldPrompts.length === 0 ? 0 : data.heldSequences ? 1 : data.heldPrompts.length;
  const generated = data.trainSequences ? heldGenerated : Math.max(sequences, heldGenerated);
  const input = sessionMemoryInput({
    ...config,
    maxBindingBytes: Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize),
    heldOutSequences: config.evalEvery > 0 ? (data.heldSequences?.length ?? data.heldPrompts.length) : 0,
    target: tc,
    draft: draftConfigFor({ config: tc }, draftVocabSize),
    maxLength: longestTrainSequence(data, config.responseLength),
    sequences,
    generated,
  });
  const options = { limits, budgetBytes: config.gpuMemoryBudget };
  // The role's plan: its suggestions name the flag to change (--round-prompts, not "feature-store samples").
  return planWithRecompute(config.cluster ? 'trainer' : 'colocated', input, options, config.recompute);
}

/** The lines `speclab train` prints for a plan (`speclab plan` prints the same for each role). */
export function memoryPlanLines(plan: MemoryPlan): string[] {
  const budget = plan.budgetBytes === undefined ? 'the adapter limits' : `a budget of ${formatBytes(plan.budgetBytes)}`;
  return [`GPU memory plan (checked against ${budget}):`, ...formatMemoryPlan(plan)];
}

/** Prints the plan; throws (a usage error: exit code 2) when it does not fit. */
export function checkTrainMemory(plan: MemoryPlan, print: (line: string) => void): void {
  for (const line of memoryPlanLines(plan)) print(line);
  if (!plan.fits) throw new UsageError(memoryPlanRefusal(plan));
}

/** The adapter limits the plan checks, from a GpuContext's limit record. */
export function adapterLimits(limits: Readonly<Record<string, number>>): AdapterLimits {
  const need = (name: string): number => {
    const v = limits[name];
    if (!(v > 0)) throw new Error(`GPU memory plan: the adapter reports no ${name}`);
    return v;
  };
  return { maxBufferSize: need('maxBufferSize'), maxStorageBufferBindingSize: need('maxStorageBufferBindingSize') };
}
