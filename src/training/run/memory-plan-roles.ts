/**
 * The GPU memory plan of each process a run can have, from the tensors of the colocated plan
 * (./memory-plan-tensors.ts), and what to change when one does not fit, named by the flag to change:
 *
 *   colocated  `speclab train`: target and draft on one device; exactly planTrainingMemory's plan
 *              (./memory-plan.ts), which `speclab train` and the lab print;
 *   trainer    `speclab train --cluster`: the draft's step (weights, gradients, AdamW moments,
 *              activations, scratch), the training batch and the one sample being copied into it
 *              from the run's feature store; the target's weights and generation KV cache when this
 *              process writes sequences or evaluates the draft (./train-run.ts), with the held-out
 *              evaluation's batches and the capture of a batch of them when --eval-every is on, and
 *              else only the target's embedding (./target-load.ts runNeedsTargetModel); no resident round;
 *   rollout    `speclab rollout`: the target, its capture forward, the captured samples of one lease
 *              (`speclab rollout --batch`, held until each is sent) and the read-back buffer of the
 *              sample being sent; no draft, no generation.
 *
 * A suggestion only ever names a flag the role has, a value it accepts (never below its floor: one
 * sample per step, two tokens per sequence, one TTT step, a round of at least one batch) and a
 * change that alters the role's total. Pure: no GPU, no globals.
 */
import { formatBytes } from '../../util/bytes.ts';
import { planTrainingMemory } from './memory-plan.ts';
import { phaseTotals, planTotal } from './memory-plan-phases.ts';
import { readbackSpec } from './memory-plan-shapes.ts';
import { checkInput, costEntries, costItems, itemSpecs, type ItemSpec } from './memory-plan-tensors.ts';
import type { AdapterLimits, ItemKey, MemoryPlan, MemoryPlanInput } from './memory-plan-types.ts';

export type PlanRole = 'colocated' | 'trainer' | 'rollout';
export const PLAN_ROLES: readonly PlanRole[] = ['colocated', 'trainer', 'rollout'];

/** The command that runs each role. */
export const ROLE_COMMANDS: Readonly<Record<PlanRole, string>> = {
  colocated: 'speclab train',
  trainer: 'speclab train --cluster',
  rollout: 'speclab rollout',
};

export interface RolePlanOptions {
  readonly limits: AdapterLimits;
  readonly budgetBytes?: number;
  /** Prompts a rollout process leases per capture (`speclab rollout --batch`); the rollout role only. */
  readonly rolloutBatch?: number;
}

/** `speclab rollout --batch`'s default. */
export const ROLLOUT_BATCH = 4;

/** The input a role's tensors are computed from: `x` is the colocated (session) input. */
function roleInput(role: PlanRole, x: MemoryPlanInput, rolloutBatch: number): MemoryPlanInput {
  if (role === 'trainer') return { ...x, featureStoreSamples: 1 };
  if (role === 'rollout') return { ...x, featureStoreSamples: rolloutBatch, generationBatch: 0 };
  return x;
}

/** The items of a role, from the colocated ones, relabelled where the role holds them for another reason. */
function roleEntries(role: 'trainer' | 'rollout', x: MemoryPlanInput, limits: AdapterLimits): [ItemKey, ItemSpec][] {
  const all = itemSpecs(x, limits);
  if (role === 'trainer') {
    const sample: ItemSpec = {
      ...all.featureStore,
      label: 'sample being batched',
      detail: `one sample at a time from the run's feature store (${x.maxLength} tokens, ${x.features}), destroyed once copied into the batch`,
    };
    // The trainer captures only the held-out sequences of --eval-every, a batch at a time.
    const heldOutCapture: ItemSpec = {
      ...itemSpecs({ ...x, featureStoreSamples: x.batchSize }, limits).targetCapture,
      label: 'held-out capture activations',
    };
    // A cluster's rounds are in Redis: the trainer spills nothing.
    const staging: ItemSpec = {
      ...all.staging,
      specs: all.staging.specs.filter((spec) => !spec.name.startsWith('spill readback')),
      detail:
        '512 uniform slots of 256 bytes, readback buffers for losses and metrics, a slice of the largest draft tensor (a checkpoint), timer',
    };
    // Nothing to generate or evaluate (a dataset's replies, --eval-prompts 0): the trainer reads only the target's
    // embedding, and the lm_head rows of the draft vocabulary (draftFrozen) from the files (target-load.ts).
    const tablesOnly = x.generationBatch === 0 && (x.heldOutSequences ?? 0) === 0;
    const embedding: ItemSpec = {
      label: 'target embedding',
      specs: all.targetWeights.specs.filter((spec) => spec.name === 'model.embed_tokens.weight'),
      detail: `the target's embedding [${x.target.vocabSize}, ${x.target.hiddenSize}] ${x.targetWeights} only: no other target weight (nothing to generate or evaluate)`,
    };
    const replaced: Partial<Record<ItemKey, ItemSpec>> = {
      targetCapture: heldOutCapture,
      staging,
      ...(tablesOnly ? { targetWeights: embedding } : {}),
    };
    return (Object.entries(all) as [ItemKey, ItemSpec][])
      .filter(([key]) => key !== 'targetCapture' || (x.heldOutSequences ?? 0) > 0)
      .map(([key, item]): [ItemKey, ItemSpec] => (key === 'featureStore' ? ['sampleBeingBatched', sample] : [key, replaced[key] ?? item]));
  }
  const one = itemSpecs({ ...x, featureStoreSamples: 1 }, limits).featureStore;
  return [
    ['targetWeights', all.targetWeights],
    ['targetCapture', all.targetCapture],
    [
      'featureStore',
      {
        ...all.featureStore,
        label: 'captured samples',
        detail: `${x.featureStoreSamples} samples of one lease (speclab rollout --batch) × ${x.maxLength} tokens, ${x.features}, held until each is sent`,
      },
    ],
    [
      'sampleReadback',
      {
        label: 'staging of one sample',
        // A read-back buffer is no storage binding: only maxBufferSize bounds it.
        specs: one.specs.map((s) => readbackSpec(s)),
        detail: "the read-back buffer of the sample being sent to the run's feature store",
      },
    ],
    // No checkpoint and no spill here: a rollout's own sample readback is the item above.
    ['staging', { ...all.staging, specs: all.staging.specs.filter((spec) => !/^(checkpoint|spill) readback/.test(spec.name)) }],
  ];
}

function costRole(role: PlanRole, x: MemoryPlanInput, limits: AdapterLimits, rolloutBatch: number) {
  const input = roleInput(role, x, rolloutBatch);
  if (role === 'colocated') return { input, ...costItems(input, limits) };
  return { input, ...costEntries(roleEntries(role, input, limits), limits) };
}

/** Does the role fit with `x`? (no problems, total within the budget) */
function fitsWith(role: PlanRole, x: MemoryPlanInput, rolloutBatch: number, limits: AdapterLimits, budget: number | undefined) {
  const { items, problems } = costRole(role, x, limits, rolloutBatch);
  const total = planTotal(items);
  return { fits: problems.length === 0 && (budget === undefined || total <= budget), total };
}

/**
 * The plan of `role` for a run whose colocated input is `x`. The colocated plan is planTrainingMemory's
 * (same items, total, problems and notes); only its suggestions name flags here.
 */
export function planRoleMemory(role: PlanRole, x: MemoryPlanInput, options: RolePlanOptions): MemoryPlan {
  const rolloutBatch = options.rolloutBatch ?? ROLLOUT_BATCH;
  if (!Number.isInteger(rolloutBatch) || rolloutBatch < 1)
    throw new Error(`memory plan: rolloutBatch must be a positive integer, got ${rolloutBatch}`);
  const { limits, budgetBytes } = options;
  let plan: MemoryPlan;
  if (role === 'colocated') plan = planTrainingMemory(x, { limits, budgetBytes });
  else {
    // Checks the input and the budget as the colocated plan does (same messages).
    checkInput(x);
    if (budgetBytes !== undefined && !(Number.isSafeInteger(budgetBytes) && budgetBytes > 0))
      throw new Error(`memory plan: budgetBytes must be a positive whole number of bytes, got ${budgetBytes}`);
    const { input, items, problems, notes } = costRole(role, x, limits, rolloutBatch);
    const totalBytes = planTotal(items);
    if (budgetBytes !== undefined && totalBytes > budgetBytes)
      problems.unshift(`the plan needs ${formatBytes(totalBytes)}, over the budget of ${formatBytes(budgetBytes)}`);
    plan = {
      input,
      items,
      phases: phaseTotals(items),
      totalBytes,
      largest: items.reduce((a, b) => (b.bytes > a.bytes ? b : a)),
      budgetBytes,
      limits,
      maxBindingBytes: Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize),
      fits: problems.length === 0,
      problems,
      notes,
      suggestions: [],
    };
  }
  return plan.fits ? { ...plan, suggestions: [] } : { ...plan, suggestions: flagSuggestions(role, x, rolloutBatch, limits, budgetBytes) };
}

/** A setting a role can lower: its flag, where it lives in the input, the lowest value that still runs. */
interface Knob {
  readonly flag: string;
  readonly roles: readonly PlanRole[];
  value(x: MemoryPlanInput, rolloutBatch: number): number;
  floor(x: MemoryPlanInput): number;
  with(x: MemoryPlanInput, rolloutBatch: number, v: number): [MemoryPlanInput, number];
  /** How the change is said where the flag belongs to another command. */
  shown?(role: PlanRole, v: number): string;
}

const KNOBS: readonly Knob[] = [
  {
    flag: '--batch-size',
    roles: ['colocated', 'trainer'],
    value: (x) => x.batchSize,
    floor: () => 1,
    with: (x, r, v) => [{ ...x, batchSize: v }, r],
  },
  {
    flag: '--max-length',
    roles: ['colocated', 'trainer', 'rollout'],
    value: (x) => x.maxLength,
    // A sequence needs two tokens to hold one next-token target.
    floor: () => 2,
    with: (x, r, v) => [{ ...x, maxLength: v }, r],
    shown: (role) => (role === 'rollout' ? " (the trainer's; it sets the sequences a rollout captures)" : ''),
  },
  {
    flag: '--ttt-length',
    roles: ['colocated', 'trainer'],
    value: (x) => x.tttLength,
    floor: () => 1,
    with: (x, r, v) => [{ ...x, tttLength: v }, r],
  },
  {
    flag: '--round-prompts',
    roles: ['colocated'],
    value: (x) => x.featureStoreSamples,
    // A round smaller than a batch would shrink every step's batch: keep at least one.
    floor: (x) => Math.min(x.batchSize, x.featureStoreSamples),
    with: (x, r, v) => [{ ...x, featureStoreSamples: v }, r],
  },
  {
    flag: '--rollout-batch',
    roles: ['rollout'],
    value: (_x, r) => r,
    floor: () => 1,
    with: (x, _r, v) => [x, v],
    shown: (_role, v) => ` (speclab rollout --batch ${v})`,
  },
];

const verdict = (r: { fits: boolean; total: number }) => `${formatBytes(r.total)}${r.fits ? ' (fits)' : ' (still does not fit)'}`;

/** For each flag of the role, the first lower value that fits (halving), or what its floor still needs; then all at once. */
export function flagSuggestions(
  role: PlanRole,
  x: MemoryPlanInput,
  rolloutBatch: number,
  limits: AdapterLimits,
  budget: number | undefined,
): string[] {
  const out: string[] = [];
  const now = fitsWith(role, x, rolloutBatch, limits, budget);
  let floorInput = x;
  let floorBatch = rolloutBatch;
  for (const knob of KNOBS) {
    if (!knob.roles.includes(role)) continue;
    const value = knob.value(x, rolloutBatch);
    const floor = knob.floor(x);
    // All flags at their floors together (a round's floor follows the lowered batch size).
    [floorInput, floorBatch] = knob.with(floorInput, floorBatch, Math.min(value, knob.floor(floorInput)));
    if (value <= floor) continue;
    let tried = value;
    let result = now;
    while (tried > floor && !result.fits) {
      tried = Math.max(floor, Math.floor(tried / 2));
      result = fitsWith(role, ...knob.with(x, rolloutBatch, tried), limits, budget);
    }
    if (result.total === now.total && !result.fits) continue; // the role does not hold what this flag sizes
    out.push(`${knob.flag} ${value} → ${tried}${knob.shown?.(role, tried) ?? ''}: ${verdict(result)}`);
  }
  for (const [flag, key] of [
    ['--feature-precision', 'features'],
    ['--target-precision', 'targetWeights'],
  ] as const) {
    if (x[key] !== 'f32') continue;
    floorInput = { ...floorInput, [key]: 'f16' };
    const result = fitsWith(role, { ...x, [key]: 'f16' }, rolloutBatch, limits, budget);
    if (result.total === now.total) continue;
    const whose = role === 'rollout' && flag === '--feature-precision' ? " (the trainer's)" : '';
    out.push(`${flag} f32 → f16${whose}: ${verdict(result)}`);
  }
  if (!out.some((s) => s.endsWith('(fits)'))) {
    const all = fitsWith(role, floorInput, floorBatch, limits, budget);
    out.push(
      all.fits
        ? `all of these together: ${formatBytes(all.total)} (fits)`
        : `even all of them at their lowest need ${formatBytes(all.total)} and do not fit: ${budget !== undefined && all.total > budget ? 'a larger --gpu-memory-budget (a device with more memory) or a smaller target' : 'a smaller target, or an adapter with larger bindings'}`,
    );
  }
  return out;
}

/**
 * The role's plan with --recompute resolved: 'on' and 'off' as given; 'auto' keeps every activation
 * unless the plan then does not fit and the recomputing plan does (the plan's `input.recompute` says
 * which was chosen).
 */
export function planWithRecompute(
  role: PlanRole,
  input: MemoryPlanInput,
  options: RolePlanOptions,
  recompute: 'auto' | 'on' | 'off' = 'auto',
): MemoryPlan {
  const planned = planRoleMemory(role, { ...input, recompute: recompute === 'on' }, options);
  if (recompute !== 'auto' || planned.fits || role === 'rollout') return planned;
  const recomputing = planRoleMemory(role, { ...input, recompute: true }, options);
  return recomputing.fits ? recomputing : planned;
}
