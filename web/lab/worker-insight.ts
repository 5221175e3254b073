/**
 * The lab worker's draft insight (docs/insight.md): captureDraftInsight (src/training/evaluation/draft-insight.ts)
 * on one held-out sample with the open session's current weights, posted as an `insight` Report.
 *
 * Captures never overlap an optimizer step: the run loop steps through `trainingGate`, and a capture
 * waits for the step in flight, so every capture sees one consistent set of weights. Between steps
 * (paused, stopped, done) a request is served at once. The run loop also calls `afterStep`, which
 * re-captures the sample the page last asked for about INSIGHT_CAPTURES_PER_RUN times a run (and at
 * the last step), so the panel follows training. A capture is one gradient-free forward of one
 * held-out batch plus one sample's readback; it changes no training state.
 */
/// <reference lib="webworker" />
import { captureDraftInsight } from '../../src/training/evaluation/draft-insight.ts';
import type { Eagle3TrainingSession } from '../../src/training/session/eagle3-session.ts';
import type { LabInsight } from './insight-view.ts';
import { lab, post } from './worker-state.ts';

/** About this many automatic captures per run (cheap: one forward of one held-out batch each). */
export const INSIGHT_CAPTURES_PER_RUN = 24;

/** The sample the page follows, and its top-k; captured automatically after steps. */
const followed = { sample: 0, topK: 5 };
/** The GPU work in flight that a capture must not interleave with (a step, or another capture). */
let busy: Promise<unknown> = Promise.resolve();

/** Runs `fn` after whatever step or capture is in flight, and holds the next one until it ends. */
export function trainingGate<T>(fn: () => Promise<T>): Promise<T> {
  const run = busy.then(fn, fn);
  busy = run.catch(() => undefined);
  return run;
}

async function capture(s: Eagle3TrainingSession, sample: number, topK: number): Promise<void> {
  // The run was stopped (its session closed) while this capture waited for the step in flight.
  if (lab.session !== s) return;
  const parts = s.insightParts();
  if (!parts) throw new Error('insight: the open session has no held-out evaluation to draw samples from');
  const insight = await captureDraftInsight(parts, sample, { topK });
  const tokenizer = lab.model?.tokenizer;
  const ids = new Set<number>([
    ...insight.inputIds,
    ...insight.steps.flatMap((st) => [...st.targets, ...st.top.flatMap((row) => row.map((x) => x.id))]),
  ]);
  const tokenText: Record<number, string> = {};
  for (const id of ids) tokenText[id] = tokenizer ? tokenizer.decode([id]) : `#${id}`;
  const report: LabInsight = { ...insight, tokenText };
  // Cloned, not transferred: the read-back array may be a view of a buffer the Gpu reuses.
  post({ type: 'insight', insight: report });
}

/** The page asks for sample `sample` (it is followed from now on). */
export async function requestInsight(sample: number, topK: number): Promise<void> {
  const s = lab.session;
  if (!s) throw new Error('insight: no training session is open (start or continue a run first)');
  followed.sample = sample;
  followed.topK = topK;
  await trainingGate(() => capture(s, sample, topK));
}

/** Called by the run loop after each optimizer step: re-captures the followed sample when due. */
export async function afterStep(s: Eagle3TrainingSession, step: number): Promise<void> {
  const every = Math.max(1, Math.ceil(s.totalSteps / INSIGHT_CAPTURES_PER_RUN));
  if ((step % every !== 0 && step !== s.totalSteps) || !s.insightParts()) return;
  await trainingGate(() => capture(s, followed.sample, followed.topK));
}
