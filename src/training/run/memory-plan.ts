/**
 * The GPU memory plan of an online EAGLE3 run, computed before anything is allocated: every tensor
 * the run will hold, grouped into items (target weights, capture activations, feature store, the
 * draft's weights, gradients and AdamW moments, the activations each TTT step keeps, …), checked
 * against a byte budget and against the adapter's buffer limits. Pure: no GPU, no globals, so
 * `speclab train` and the browser lab compute the same plan from the same settings.
 *
 * How it counts, and why that makes the total an upper bound of what the device holds:
 *   - each tensor costs what Gpu.tensor really allocates: its row parts (planRowChunks), each
 *     rounded up to the pool's size class (sizeClass: at least 256 bytes, at most 25% over);
 *   - within a phase items are added, never overlapped: the buffer pool keeps released buffers for
 *     reuse, so memory one tensor frees is only reused by a later tensor of the same size class.
 *     The sum is what the pool holds if nothing is ever reused. Between the three phases of a run
 *     (the target generating, a capture forward, the draft's steps) the run empties the pool, so the
 *     total is the largest phase (./memory-plan-phases.ts);
 *   - temporaries released inside a step (logits, the backward's scratch) are counted once: the
 *     next step takes the same buffers back from the pool.
 * Shapes mirror src/model/eagle3/forward.ts, forward-state.ts (StepActivations, Eagle3ForwardState) and backward.ts,
 * src/model/target/model.ts (capture forward, KV cache), src/optim/adamw-backend.ts and
 * src/data/feature-dataloader.ts; test/training/run/memory-plan.test.ts checks the plan against the
 * measured peak of a real training step.
 *
 * Limits: a tensor whose single row is larger than one binding cannot be stored at all; a tensor
 * the code binds whole (activations, a stored sample's features) must fit one binding; the ones the
 * kernels read by row part (weights, grads, moments, embeddings, logits, the collated batch's
 * hidden_state and target) are split, and the plan says so.
 */
import type { Eagle3Config } from '../../config/eagle3-config.ts';
import type { TargetModelConfig } from '../../config/hf-config.ts';
import { captureBatchTokens } from '../../inference/target-feature-source.ts';
import { formatBytes } from '../../util/bytes.ts';
import { phaseTotals, planTotal } from './memory-plan-phases.ts';
import { checkInput, costItems } from './memory-plan-tensors.ts';
import type { AdapterLimits, MemoryPlan, MemoryPlanInput, Precision } from './memory-plan-types.ts';

export {
  DRAFT_STEP_ITEMS,
  type AdapterLimits,
  type ItemKey,
  type MemoryPlan,
  type MemoryPlanInput,
  type PlanItem,
  type Precision,
} from './memory-plan-types.ts';

/** Prompts per batched generation, as a session runs them (continueWithTarget). */
export const SESSION_GENERATION_BATCH = 16;

/** What an Eagle3TrainingSession's plan needs to know of its run (`speclab train` and the lab both build it here). */
export interface SessionMemoryRun {
  readonly target: TargetModelConfig;
  readonly draft: Eagle3Config;
  readonly batchSize: number;
  readonly tttLength: number;
  readonly roundPrompts: number;
  readonly featurePrecision?: Precision;
  /** What a sample's target holds (--target-repr; a session's default is compact features). */
  readonly targetRepr?: 'logits' | 'hidden_state';
  /** Storage of the frozen target's weights (--target-precision). */
  readonly targetPrecision?: Precision;
  /** Longest training sequence in tokens. */
  readonly maxLength: number;
  /** Training sequences (a round holds at most this many). */
  readonly sequences: number;
  /** Sequences the target generates in batches (training continuations, held-out prompts). */
  readonly generated: number;
  /** Held-out sequences of the periodic evaluation (--eval-every), kept on the GPU all run; 0 without it. */
  readonly heldOutSequences: number;
  /** Bytes one binding holds on the planned adapter (min of maxStorageBufferBindingSize and maxBufferSize): sizes the capture forward. */
  readonly maxBindingBytes: number;
}

/** The plan input of a session: the target's weights in f32 (as the session loads them), one round resident in the store. */
export function sessionMemoryInput(run: SessionMemoryRun): MemoryPlanInput {
  return {
    target: run.target,
    targetWeights: run.targetPrecision ?? 'f32',
    draft: run.draft,
    batchSize: run.batchSize,
    maxLength: run.maxLength,
    tttLength: run.tttLength,
    features: run.featurePrecision ?? 'f32',
    targetRepr: run.targetRepr ?? 'hidden_state',
    featureStoreSamples: Math.max(1, Math.min(run.roundPrompts, run.sequences)),
    captureBatchTokens: captureBatchTokens(run.target, run.maxBindingBytes),
    generationBatch: Math.max(0, Math.min(SESSION_GENERATION_BATCH, run.generated)),
    heldOutSequences: run.heldOutSequences,
  };
}

/** The plan for `input`, checked against `budgetBytes` (when given) and the adapter's limits. */
export function planTrainingMemory(input: MemoryPlanInput, options: { limits: AdapterLimits; budgetBytes?: number }): MemoryPlan {
  checkInput(input);
  const { limits, budgetBytes } = options;
  if (budgetBytes !== undefined && !(Number.isSafeInteger(budgetBytes) && budgetBytes > 0))
    throw new Error(`memory plan: budgetBytes must be a positive whole number of bytes, got ${budgetBytes}`);
  const maxBindingBytes = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const { items, problems, notes } = costItems(input, limits);
  const totalBytes = planTotal(items);
  const largest = items.reduce((a, b) => (b.bytes > a.bytes ? b : a));
  if (budgetBytes !== undefined && totalBytes > budgetBytes)
    problems.unshift(`the plan needs ${formatBytes(totalBytes)}, over the budget of ${formatBytes(budgetBytes)}`);
  const fits = problems.length === 0;
  const suggestions = fits ? [] : suggest(input, limits, budgetBytes);
  return {
    input,
    items,
    phases: phaseTotals(items),
    totalBytes,
    largest,
    budgetBytes,
    limits,
    maxBindingBytes,
    fits,
    problems,
    notes,
    suggestions,
  };
}

/** Would `x` fit? (no problems, total within the budget) */
function fitsWith(x: MemoryPlanInput, limits: AdapterLimits, budget: number | undefined): { fits: boolean; total: number } {
  const { items, problems } = costItems(x, limits);
  const total = planTotal(items);
  return { fits: problems.length === 0 && (budget === undefined || total <= budget), total };
}

/** For each knob, the first smaller value that fits (halving), or what its floor still needs. */
function suggest(x: MemoryPlanInput, limits: AdapterLimits, budget: number | undefined): string[] {
  const out: string[] = [];
  const knobs: [string, keyof MemoryPlanInput, number][] = [
    ['batch size', 'batchSize', x.batchSize],
    ['max length', 'maxLength', x.maxLength],
    ['TTT length', 'tttLength', x.tttLength],
    ['feature-store samples', 'featureStoreSamples', x.featureStoreSamples],
  ];
  for (const [name, key, value] of knobs) {
    if (value <= 1) continue;
    let tried = value;
    let result = { fits: false, total: 0 };
    while (tried > 1 && !result.fits) {
      tried = Math.max(1, Math.floor(tried / 2));
      result = fitsWith({ ...x, [key]: tried }, limits, budget);
    }
    out.push(`${name} ${value} → ${tried}: ${formatBytes(result.total)}${result.fits ? ' (fits)' : ' (still does not fit)'}`);
  }
  for (const [name, key] of [
    ['feature precision', 'features'],
    ['target weight precision', 'targetWeights'],
  ] as const) {
    if (x[key] !== 'f32') continue;
    const result = fitsWith({ ...x, [key]: 'f16' }, limits, budget);
    out.push(`${name} f32 → f16: ${formatBytes(result.total)}${result.fits ? ' (fits)' : ' (still does not fit)'}`);
  }
  // When no single change is enough: all of them at once, or what stays whatever is lowered.
  const floor: MemoryPlanInput = {
    ...x,
    batchSize: 1,
    maxLength: 1,
    tttLength: 1,
    featureStoreSamples: 1,
    features: 'f16',
    targetWeights: 'f16',
  };
  const all = fitsWith(floor, limits, budget);
  if (!out.some((s) => s.endsWith('(fits)')))
    out.push(
      all.fits
        ? `all of these together: ${formatBytes(all.total)} (fits)`
        : `even all of them at their minimum need ${formatBytes(all.total)}: raise the budget or use a smaller model`,
    );
  return out;
}

/** The plan as a small table: item, bytes, share, what it is; then the verdict. */
export function formatMemoryPlan(plan: MemoryPlan): string[] {
  const width = Math.max(...plan.items.map((i) => i.label.length), 'total'.length);
  const lines = plan.items.map(
    (i) =>
      `  ${i.label.padEnd(width)}  ${formatBytes(i.bytes).padStart(10)}  ${((100 * i.bytes) / Math.max(plan.totalBytes, 1)).toFixed(1).padStart(5)}%  ${i.detail}`,
  );
  lines.push(`  ${'phases'.padEnd(width)}  ${phaseLine(plan)}`);
  const budget =
    plan.budgetBytes === undefined
      ? 'no byte budget (WebGPU reports no total memory; --gpu-memory-budget sets one)'
      : `budget ${formatBytes(plan.budgetBytes)}`;
  lines.push(
    `  ${'total'.padEnd(width)}  ${formatBytes(plan.totalBytes).padStart(10)}  ${budget}; one binding holds ${formatBytes(plan.maxBindingBytes)}`,
  );
  for (const n of plan.notes) lines.push(`  note: ${n}`);
  lines.push(plan.fits ? '  fits' : `  does not fit: ${plan.problems.join('; ')}`);
  if (!plan.fits && plan.suggestions.length > 0) lines.push(`  lower: ${plan.suggestions.join('; ')}`);
  return lines;
}

/** What each phase holds: the total is the largest. */
function phaseLine(plan: MemoryPlan): string {
  return `${plan.phases.map((p) => `${p.phase} ${formatBytes(p.bytes)}`).join(', ')}: one at a time, the total is the largest`;
}

/** One line for a refused run: the largest item, the total, the budget, the first problem, what to lower. */
export function memoryPlanRefusal(plan: MemoryPlan): string {
  const budget = plan.budgetBytes === undefined ? 'no byte budget' : `budget ${formatBytes(plan.budgetBytes)}`;
  const lower = plan.suggestions.length > 0 ? `; lower: ${plan.suggestions.join('; ')}` : '';
  return `GPU memory plan does not fit: ${plan.problems.join('; ')} (total ${formatBytes(plan.totalBytes)}, ${budget}, largest item ${plan.largest.label} ${formatBytes(plan.largest.bytes)})${lower}`;
}
