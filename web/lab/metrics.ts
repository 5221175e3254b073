/**
 * The lab's per-step metrics, one shape for every source the charts draw: the worker's live steps,
 * the steps a reloaded tab restores from the saved run, and a `metrics.jsonl` from `speclab train`
 * (src/cli/train.ts writes it: one JSON record per line, `phase: 'train'` per optimizer step and
 * `phase: 'eval'` with SpecForge keys on the steps the held-out evaluation ran). Pure: no DOM.
 *
 * Acceptance length, everywhere on the page, is the SGLang quantity: tokens emitted per target
 * verification, the bonus token included. The simulated one from per-position accuracies is
 * 1 + Σ_k Π_{j≤k} acc_j (the sessions report the sum without the 1).
 */
import type { EvalReport, RunStatus, StepReport } from './protocol.ts';

/** One optimizer step as the charts draw it; `status` is the worker's (a CLI log has none). */
export interface MetricPoint {
  step: StepReport;
  status?: RunStatus;
  eval?: EvalReport;
}

/** Acceptance length (bonus token included) from Σ_k Π_{j≤k} acc_j. */
export function acceptanceLength(simulatedWithoutBonus: number): number {
  return 1 + simulatedWithoutBonus;
}

function numberArray(v: unknown, where: string): number[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'number')) throw new Error(`${where} is not an array of numbers`);
  return v as number[];
}

function num(v: unknown, where: string): number {
  if (typeof v !== 'number') throw new Error(`${where} is not a number`);
  return v;
}

/** The values of `prefix<k>` keys, k = 0, 1, … while present. */
function indexed(entry: Record<string, unknown>, prefix: string, where: string): number[] {
  const out: number[] = [];
  for (let k = 0; `${prefix}${k}` in entry; k++) out.push(num(entry[`${prefix}${k}`], `${where}: "${prefix}${k}"`));
  return out;
}

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
    if (entry.phase === 'train') {
      const step = num(entry.step, `${where}: "step"`);
      const accs = numberArray(entry.accs, `${where}: "accs"`);
      const plosses = numberArray(entry.plosses, `${where}: "plosses"`);
      if (plosses.length !== accs.length) throw new Error(`${where}: ${plosses.length} plosses for ${accs.length} accs`);
      steps.set(step, {
        step: {
          step,
          total: num(entry.totalSteps, `${where}: "totalSteps"`),
          loss: num(entry.loss, `${where}: "loss"`),
          plosses,
          accs,
          simulatedAcceptance: num(entry.simulatedAcceptance, `${where}: "simulatedAcceptance"`),
          tokensPerSecond: typeof entry.tokensPerSecond === 'number' ? entry.tokensPerSecond : Number.NaN,
          lr: typeof entry.lr === 'number' ? entry.lr : Number.NaN,
          checkpointed: entry.checkpointed === true,
        },
      });
    } else if (entry.phase === 'eval') {
      const step = num(entry.step, `${where}: "step"`);
      const accs = indexed(entry, 'eval/per_position_acc/', where);
      evals.set(step, {
        step,
        every: 0,
        sequences: 0,
        lossTokens: 0,
        loss: num(entry['eval/avg_loss'], `${where}: "eval/avg_loss"`),
        plosses: indexed(entry, 'eval/ploss_', where),
        accs,
        acceptanceRates: indexed(entry, 'eval/acceptance_rate_', where),
        simulatedAcceptance: num(entry['eval/simulated_acc_len'], `${where}: "eval/simulated_acc_len"`),
      });
    }
  });
  if (steps.size === 0) throw new Error(`${source}: no train steps (lines with "phase": "train"); is this a speclab train metrics.jsonl?`);
  return [...steps.values()].sort((a, b) => a.step.step - b.step.step).map((p) => ({ ...p, eval: evals.get(p.step.step) }));
}
