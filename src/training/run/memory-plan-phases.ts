/**
 * The three phases of a run, and which items of its memory plan each holds:
 *
 *   generation  the target writes replies and continuations, then decodes the held-out prompts alone
 *               and with the untrained draft; after training, with the trained one (its KV cache,
 *               the evaluation drafter);
 *   capture     a capture forward of the target (a rollout's round, the held-out features);
 *   step        the draft's training steps and periodic evaluation (the batch, activations, scratch).
 *
 * Each phase starts and ends by destroying the buffer pool's free buffers (Gpu.trimPool: at the end
 * of a generation, of speculative decoding, before and after a capture forward), so what one phase
 * released is not held through the next. What every phase holds (weights, moments, the feature
 * store, the held-out batches, staging) is counted in each. The plan's total is the largest phase.
 * Pure: no GPU, no globals.
 */
import type { ItemKey, PhaseTotal, PlanItem, PlanPhase } from './memory-plan-types.ts';

/** The items only one phase holds; every other item is held by all three. */
const OWN: Readonly<Record<PlanPhase, readonly ItemKey[]>> = {
  generation: ['targetKv', 'targetGeneration', 'drafter'],
  capture: ['targetCapture', 'sampleReadback'],
  step: ['batch', 'activations', 'scratch'],
};
export const PLAN_PHASES = Object.keys(OWN) as PlanPhase[];

/** Each phase's bytes: the items every phase holds, and its own. */
export function phaseTotals(items: readonly PlanItem[]): PhaseTotal[] {
  const others = (phase: PlanPhase) => new Set(PLAN_PHASES.filter((p) => p !== phase).flatMap((p) => OWN[p]));
  return PLAN_PHASES.map((phase) => {
    const skip = others(phase);
    return { phase, bytes: items.reduce((a, i) => (skip.has(i.key) ? a : a + i.bytes), 0) };
  });
}

/** The plan's total: the largest phase. */
export function planTotal(items: readonly PlanItem[]): number {
  return Math.max(...phaseTotals(items).map((p) => p.bytes));
}
