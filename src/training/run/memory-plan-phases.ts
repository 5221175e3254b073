/**
 * The four phases of a run, and which items of its memory plan each holds:
 *
 *   generation  the target writes replies and continuations, then decodes the held-out prompts alone
 *               and with the untrained draft; after training, with the trained one (its KV cache,
 *               the evaluation drafter);
 *   capture     a capture forward of the target (a rollout's round, the held-out features);
 *   batching    collating a batch: the batch, and a cluster trainer's sample uploaded to be copied
 *               into it (destroyed once the copies are submitted, data/dataplane-feature-store.ts);
 *   step        the draft's training steps and periodic evaluation (the batch, activations, scratch).
 *
 * Each phase starts and ends by destroying the buffer pool's free buffers (Gpu.trimPool: at the end
 * of a generation, of speculative decoding, before and after a capture forward), so what one phase
 * released is not held through the next. What every phase holds (weights, moments, the feature
 * store, the held-out batches, staging) is counted in each. The plan's total is the largest phase.
 * Pure: no GPU, no globals.
 */
import type { ItemKey, PhaseTotal, PlanItem, PlanPhase } from './memory-plan-types.ts';

/** The items some phases hold (the batch: while it is collated and while it trains); every other item is held by all. */
const OWN: Readonly<Record<PlanPhase, readonly ItemKey[]>> = {
  generation: ['targetKv', 'targetGeneration', 'drafter'],
  capture: ['targetCapture', 'sampleReadback'],
  batching: ['sampleBeingBatched', 'batch'],
  step: ['batch', 'activations', 'scratch'],
};
export const PLAN_PHASES = Object.keys(OWN) as PlanPhase[];
const OWNED = new Set(PLAN_PHASES.flatMap((p) => OWN[p]));

/** Each phase's bytes: the items every phase holds, and its own. */
export function phaseTotals(items: readonly PlanItem[]): PhaseTotal[] {
  return PLAN_PHASES.map((phase) => ({
    phase,
    bytes: items.reduce((a, i) => (!OWNED.has(i.key) || OWN[phase].includes(i.key) ? a + i.bytes : a), 0),
  }));
}

/** The plan's total: the largest phase. */
export function planTotal(items: readonly PlanItem[]): number {
  return Math.max(...phaseTotals(items).map((p) => p.bytes));
}
