/**
 * The lab's per-step metrics, one shape for every source the charts draw: the worker's live steps,
 * the steps a reloaded tab restores from the saved run, and a `metrics.jsonl` from `speclab train`
 * (one JSON record per line, its schema in src/contracts/metrics-record.ts: `phase: 'train'` per
 * optimizer step and `phase: 'eval'` with SpecForge keys on the steps the held-out evaluation ran).
 * The point types are the worker's messages' (./protocol.ts). Pure: no DOM.
 *
 * Acceptance length, everywhere on the page, is the SGLang quantity: tokens emitted per target
 * verification, the bonus token included. The simulated one from per-position accuracies is
 * 1 + Σ_k Π_{j≤k} acc_j (the sessions report the sum without the 1).
 */
import { z } from 'zod';
import { checkPositions, describeIssue, EvalFields, evalRecordValues, TrainFields } from '../../src/contracts/metrics-record.ts';
import type { EvalReport, MetricPoint } from './protocol.ts';

export type { MetricPoint } from './protocol.ts';

/** Acceptance length (bonus token included) from Σ_k Π_{j≤k} acc_j. */
export function acceptanceLength(simulatedWithoutBonus: number): number {
  return 1 + simulatedWithoutBonus;
}

/**
 * The records the charts draw, read from a log of any speclab version (src/contracts/metrics-record.ts
 * has the exact ones): each field of the schema checked when present and the drawn ones required
 * (tokensPerSecond, lr and checkpointed were not always written). A train record's other keys are
 * not drawn; an eval record's are its SpecForge metrics.
 */
const Time = { time: z.string().optional() };
const TrainLine = TrainFields.partial()
  .required({ phase: true, step: true, totalSteps: true, loss: true, plosses: true, accs: true, simulatedAcceptance: true })
  .extend(Time)
  .catchall(z.unknown())
  .superRefine(checkPositions);
const EvalLine = EvalFields.extend(Time).catchall(EvalFields.shape['eval/avg_loss']);

/**
 * The train steps of a `speclab train` metrics.jsonl, each with the held-out evaluation logged at
 * its step. A resumed run logs replayed steps again: the last record of a step wins. A last line
 * cut by a kill mid-append is skipped; any other bad line fails naming `source` and the line.
 */
export function parseMetricsJsonl(text: string, source: string): MetricPoint[] {
  const lines = text.split('\n');
  const steps = new Map<number, MetricPoint>();
  const evals = new Map<number, EvalReport>();
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    const where = `${source} line ${i + 1}`;
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch (err) {
      if (i === lines.length - 1) return; // a line cut by a kill mid-append
      throw new Error(`${where}: not JSON (${(err as Error).message})`, { cause: err });
    }
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new Error(`${where}: not a JSON object`);
    const view = entry.phase === 'train' ? TrainLine : entry.phase === 'eval' ? EvalLine : undefined;
    const parsed = view?.safeParse(entry);
    if (parsed && !parsed.success) throw new Error(`${where}: ${describeIssue(parsed.error)}`);
    if (parsed?.data.phase === 'train') {
      const r = parsed.data;
      steps.set(r.step, {
        step: {
          step: r.step,
          total: r.totalSteps,
          loss: r.loss,
          plosses: r.plosses,
          accs: r.accs,
          simulatedAcceptance: r.simulatedAcceptance,
          tokensPerSecond: r.tokensPerSecond ?? Number.NaN,
          lr: r.lr ?? Number.NaN,
          checkpointed: r.checkpointed === true,
        },
      });
    } else if (parsed?.data.phase === 'eval') {
      const { step, loss, plosses, accs, acceptanceRates, simulatedAcceptance } = evalRecordValues(parsed.data);
      evals.set(step, { step, every: 0, sequences: 0, lossTokens: 0, loss, plosses, accs, acceptanceRates, simulatedAcceptance });
    }
  });
  if (steps.size === 0) throw new Error(`${source}: no train steps (lines with "phase": "train"); is this a speclab train metrics.jsonl?`);
  return [...steps.values()].sort((a, b) => a.step.step - b.step.step).map((p) => ({ ...p, eval: evals.get(p.step.step) }));
}
