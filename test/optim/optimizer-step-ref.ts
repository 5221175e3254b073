/**
 * Test helper: one optimizer step of AdamWBackend in float64, from the pieces src/reference/optim.ts
 * checks on their own: the global norm over every gradient, the clip coefficient, the schedule's
 * learning rate at `scheduleIndex` and one AdamW update per tensor with bias correction `biasStep`.
 * Shared by test/optim/adamw-backend.test.ts and parameter-arena.test.ts.
 */
import type { OptimizerConfig } from '../../src/optim/adamw-backend.ts';
import { learningRate } from '../../src/optim/schedule.ts';
import { adamwRef, clipCoefRef, globalNormRef } from '../../src/reference/optim.ts';

export type AdamwRefState = ReturnType<typeof adamwRef>;

/** A tensor's float64 state before its first step: the initial values, zero moments. */
export function initialAdamwState(init: ArrayLike<number>): AdamwRefState {
  return { param: Float64Array.from(init), m: new Float64Array(init.length), v: new Float64Array(init.length) };
}

/** The states after one step on `grads` (one per state, in order), and the step's global norm. */
export function optimizerStepRef(
  states: readonly AdamwRefState[],
  grads: readonly ArrayLike<number>[],
  config: OptimizerConfig,
  scheduleIndex: number,
  biasStep: number,
): { states: AdamwRefState[]; norm: number } {
  const norm = globalNormRef(grads);
  const coef = clipCoefRef(norm, config.maxGradNorm);
  const lr = learningRate({ ...config.schedule, baseLr: config.lr }, scheduleIndex);
  const next = states.map((s, i) =>
    adamwRef(
      s.param,
      Float64Array.from(grads[i], (g) => g * coef),
      s.m,
      s.v,
      { ...config, lr, step: biasStep },
    ),
  );
  return { states: next, norm };
}
