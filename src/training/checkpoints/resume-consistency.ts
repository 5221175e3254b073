/**
 * Cross-checks of a resume (docs/durability.md §8). Each durable record is sealed on its own (the
 * journal's frame CRCs, a checkpoint's COMPLETE marker), but a record edited with its seal recomputed,
 * or a checkpoint copied from another run, passes its own seal and would train a different run. So
 * before the first step the records are checked against each other: the ledger against the run's
 * plan, the checkpoint's counters against themselves, the ledger and the plan, and every kept
 * checkpoint against the run's contract. A mismatch is refused naming both records and both values.
 */
import { onlineSampleId } from '../../contracts/index.ts';
import type { FileStore } from '../../ports/storage.ts';
import type { RunContract } from './run-contract.ts';
import {
  CheckpointRefusedError,
  listCheckpoints,
  loadCheckpointState,
  type CheckpointRef,
  type TrainingState,
} from './train-checkpoint.ts';

/** The ledger as a resume read it: the marker first, then the committed ids (so every acked id is among them). */
export interface LedgerRecords {
  /** Where the ledger keeps its acks (its journal), named in refusals. */
  readonly source: string;
  readonly acked: ReadonlySet<string>;
  readonly globalStep: number | null;
  readonly committed: ReadonlySet<string>;
}

/** A run's plan: the sample ids of each round of its stream, trained in steps of `batchSize` that never span two rounds. */
export interface StreamPlan {
  readonly rounds: readonly (readonly string[])[];
  readonly batchSize: number;
  /** What the plan is made of, named in refusals. */
  readonly source: string;
}

/** A checkpoint's state and the state.json it was read from. */
export interface CheckpointRecord {
  readonly source: string;
  readonly state: TrainingState;
}

/** The plan of an online session: its rounds of tasks (sample id `<runId>:<taskId>`), described by the settings that make them. */
export function sessionStreamPlan(
  runId: string,
  rounds: readonly (readonly { readonly taskId: string }[])[],
  settings: { readonly seed: number; readonly epochs: number; readonly roundPrompts: number; readonly batchSize: number },
  sequences: number,
): StreamPlan {
  const samples = rounds.reduce((n, r) => n + r.length, 0);
  return {
    rounds: rounds.map((round) => round.map((t) => onlineSampleId(runId, t.taskId))),
    batchSize: settings.batchSize,
    source: `this run's plan (seed ${settings.seed}: ${settings.epochs} epochs of ${sequences} sequences in rounds of ${settings.roundPrompts}, batch ${settings.batchSize}; ${samples} samples)`,
  };
}

/** The round of each optimizer step of the plan and the samples it trains, in order. */
function planSteps(plan: StreamPlan): { round: number; samples: number }[] {
  const steps: { round: number; samples: number }[] = [];
  for (const [round, ids] of plan.rounds.entries())
    for (let taken = 0; taken < ids.length; taken += plan.batchSize)
      steps.push({ round, samples: Math.min(plan.batchSize, ids.length - taken) });
  return steps;
}

/** Every committed id is a sample of the plan, every acked id is committed, and the ledger's step is within the plan. */
export function ledgerAgainstPlan(ledger: LedgerRecords, plan: StreamPlan): string | undefined {
  const planned = new Set(plan.rounds.flat());
  for (const id of ledger.committed)
    if (!planned.has(id))
      return `${ledger.source} holds committed sample ${id}, which is not in ${plan.source}: the ledger is another run's, or was edited`;
  for (const id of ledger.acked)
    if (!ledger.committed.has(id))
      return `${ledger.source} acks sample ${id}, but holds no commit of it: a commit record was lost or edited`;
  const steps = planSteps(plan).length;
  if ((ledger.globalStep ?? 0) > steps) return `${ledger.source} is at step ${ledger.globalStep}, but ${plan.source} has ${steps} steps`;
  return undefined;
}

/**
 * A checkpoint's own counters: the trainer steps the optimizer once per global step (so the optimizer
 * step, which places the learning-rate schedule, equals the global step), skips at most the steps it
 * took, and runs `accumulationSteps` micro-batches per step.
 */
export function checkpointCounters(checkpoint: CheckpointRecord): string | undefined {
  const { source, state } = checkpoint;
  if (state.optimizerStep !== state.globalStep)
    return `${source} has optimizerStep ${state.optimizerStep} but globalStep ${state.globalStep}: the optimizer steps once per global step, so the learning-rate schedule would resume at another step`;
  const skipped = state.skippedSteps ?? 0;
  if (!Number.isSafeInteger(skipped) || skipped < 0 || skipped > state.optimizerStep)
    return `${source} has skippedSteps ${skipped}, outside 0..${state.optimizerStep} (its optimizerStep): AdamW's bias correction would count ${state.optimizerStep - skipped} updates`;
  const micro = state.globalStep * state.contract.accumulationSteps;
  if (state.microStep !== micro)
    return `${source} has microStep ${state.microStep} but globalStep ${state.globalStep} × accumulationSteps ${state.contract.accumulationSteps} = ${micro}`;
  return undefined;
}

/** The checkpoint resumed against the ledger (step and acked samples) and the plan (step count, samples and rounds trained). */
export function checkpointAgainstLedger(checkpoint: CheckpointRecord, ledger: LedgerRecords, plan: StreamPlan): string | undefined {
  const { source, state } = checkpoint;
  const consumed = state.data.samplesConsumed;
  if (ledger.globalStep !== state.globalStep)
    return `${ledger.source} is at step ${ledger.globalStep ?? 'none'}, but ${source} is step ${state.globalStep}`;
  if (ledger.acked.size !== consumed)
    return `${ledger.source} acks ${ledger.acked.size} samples through step ${state.globalStep}, but ${source} consumed ${consumed} (data.samplesConsumed)${ledger.acked.size < consumed ? ': the journal lost an ack' : ': the journal acks samples no step trained'}`;
  const steps = planSteps(plan);
  if (state.globalStep > steps.length) return `${source} is step ${state.globalStep}, but ${plan.source} has ${steps.length} steps`;
  const through = steps.slice(0, state.globalStep);
  const expected = through.reduce((n, s) => n + s.samples, 0);
  if (consumed !== expected)
    return `${source} consumed ${consumed} samples (data.samplesConsumed) at step ${state.globalStep}, but ${plan.source} trains ${expected} through that step`;
  // Steps never span rounds: rounds before the step's round are wholly acked, later ones not at all.
  const round = through.at(-1)?.round ?? -1;
  for (const [r, ids] of plan.rounds.entries()) {
    const wrong = ids.find((id) => (r < round ? !ledger.acked.has(id) : r > round && ledger.acked.has(id)));
    if (wrong !== undefined)
      return `${ledger.source} ${r < round ? 'does not ack' : 'acks'} sample ${wrong} of round ${r}, but ${plan.source} trains it ${r < round ? 'before' : 'after'} step ${state.globalStep} of ${source}`;
  }
  return undefined;
}

/** Another kept checkpoint of the run against the run's contract: a folder copied from another run is refused. */
export function checkpointAgainstContract(
  checkpoint: CheckpointRecord,
  runId: string,
  contract: RunContract,
  resumed: string,
): string | undefined {
  const { source, state } = checkpoint;
  if (state.runId !== runId) return `${source} is of run ${state.runId}, ${resumed} of run ${runId}`;
  const keys = [...new Set([...Object.keys(contract), ...Object.keys(state.contract)])] as (keyof RunContract)[];
  const drift = keys.filter((k) => state.contract[k] !== contract[k]);
  if (drift.length === 0) return undefined;
  const values = drift.map((k) => `${k} ${JSON.stringify(state.contract[k] ?? null)} against ${JSON.stringify(contract[k] ?? null)}`);
  return `${source} and ${resumed} are checkpoints of different runs (${values.join('; ')}): a checkpoint was copied from another run`;
}

export interface ResumeRecords {
  readonly runId: string;
  /** The run's checkpoint store: every kept checkpoint of the run is checked against its contract. */
  readonly checkpoints: FileStore;
  readonly ledger: LedgerRecords;
  /** The checkpoint the resume restored; undefined when it restored none (the stream starts over). */
  readonly restored?: { readonly ref: CheckpointRef; readonly state: TrainingState };
  readonly contract: RunContract;
  readonly plan: StreamPlan;
}

/** Refuses (CheckpointRefusedError, one line naming both records and both values) a resume whose durable records disagree. */
export async function checkResumeConsistency(records: ResumeRecords): Promise<void> {
  const { runId, checkpoints, ledger, restored, plan } = records;
  const resumed = restored && { source: `${checkpoints.root}/${restored.ref.dir}/state.json`, state: restored.state };
  let why = ledgerAgainstPlan(ledger, plan);
  if (!why && resumed) why = checkpointCounters(resumed) ?? checkpointAgainstLedger(resumed, ledger, plan);
  if (!why && !resumed && ledger.acked.size > 0)
    why = `${ledger.source} acks ${ledger.acked.size} samples, but ${checkpoints.root} holds no checkpoint of them`;
  for (const ref of why ? [] : await listCheckpoints(checkpoints, runId)) {
    if (ref.dir === restored?.ref.dir) continue;
    const other = { source: `${checkpoints.root}/${ref.dir}/state.json`, state: await loadCheckpointState(checkpoints, ref) };
    why = checkpointAgainstContract(other, runId, records.contract, resumed?.source ?? 'this run');
    if (why) break;
  }
  if (why) throw new CheckpointRefusedError(`resume ${runId}: ${why}; refusing to train on records that disagree`);
}
