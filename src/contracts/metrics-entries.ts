/**
 * The writers' side of `metrics.jsonl` (./metrics-record.ts is the schema): one constructor per
 * record, building it from its values with the keys in the order the log has always had them, so a
 * writer cannot add a field the schema lacks (typed) nor a SpecForge key it lacks (checked here).
 */
import type { z } from 'zod';
import {
  EvalMetricKey,
  TrainMetricKey,
  type ConfigEntry,
  type DataEntry,
  type EvalAfterEntry,
  type EvalBeforeEntry,
  type EvalEntry,
  type MetricsEntry,
  type OfflineSummaryEntry,
  type ResumeEventEntry,
  type SessionEventEntry,
  type SpecEval,
  type SpecEvals,
  type SpecForgeMetrics,
  type SummaryEntry,
  type TrainEntry,
  type TrainValues,
} from './metrics-record.ts';

/** The line for `entry` stamped `time` (ISO), newline included. */
export function metricsLine(time: string, entry: MetricsEntry): string {
  return `${JSON.stringify({ time, ...entry })}\n`;
}

/** The run's validated settings with the resolved target directory. */
export function configRecord(settings: object, target: string): ConfigEntry {
  return { phase: 'config', ...settings, target };
}

export function dataRecord(d: Omit<DataEntry, 'phase'>): DataEntry {
  return {
    phase: 'data',
    trainSequences: d.trainSequences,
    trainTokens: d.trainTokens,
    heldOut: d.heldOut,
    draftVocabSize: d.draftVocabSize,
    distinctTokens: d.distinctTokens,
    vocabCoverage: d.vocabCoverage,
  };
}

function specEval(e: SpecEval): SpecEval {
  return {
    acceptanceLength: e.acceptanceLength,
    verifications: e.verifications,
    acceptedDraftTokens: e.acceptedDraftTokens,
    tokensPerSecond: e.tokensPerSecond,
    lossless: e.lossless,
  };
}

function specEvals(e: SpecEvals): SpecEvals {
  return { heldOut: specEval(e.heldOut), ...(e.train ? { train: specEval(e.train) } : {}) };
}

export function evalBeforeRecord(e: SpecEvals): EvalBeforeEntry {
  return { phase: 'eval-before', ...specEvals(e) };
}

export function evalAfterRecord(e: SpecEvals): EvalAfterEntry {
  return { phase: 'eval-after', ...specEvals(e) };
}

/** `metrics` (src/training/evaluation/metric-keys.ts specForgeMetrics) after checking every key is one `key` allows. */
function specForgeKeys<K extends string>(metrics: Readonly<Record<string, number>>, key: z.ZodType<K>, kind: string): SpecForgeMetrics<K> {
  for (const k of Object.keys(metrics))
    if (!key.safeParse(k).success) throw new Error(`${kind} record: "${k}" is not a SpecForge ${kind} key`);
  return metrics as SpecForgeMetrics<K>;
}

/** One optimizer step; `specForge`: its SpecForge `train/…` keys (online); `replay`: an earlier process logged it. */
export function trainRecord(v: TrainValues, o: { replay: boolean; specForge?: Readonly<Record<string, number>> }): TrainEntry {
  return {
    phase: 'train',
    step: v.step,
    totalSteps: v.totalSteps,
    loss: v.loss,
    plosses: v.plosses,
    accs: v.accs,
    simulatedAcceptance: v.simulatedAcceptance,
    lr: v.lr,
    gradNorm: v.gradNorm,
    samples: v.samples,
    tokensPerSecond: v.tokensPerSecond,
    checkpointed: v.checkpointed,
    elapsedSeconds: v.elapsedSeconds,
    ...(o.specForge ? specForgeKeys(o.specForge, TrainMetricKey, 'train') : {}),
    ...(o.replay ? { replay: true } : {}),
  };
}

/** The held-out evaluation of step `step` under its SpecForge `eval/…` keys. */
export function evalRecord(step: number, specForge: Readonly<Record<string, number>>, replay: boolean): EvalEntry {
  const metrics = specForgeKeys(specForge, EvalMetricKey, 'eval');
  for (const required of ['eval/avg_loss', 'eval/simulated_acc_len'] as const)
    if (metrics[required] === undefined) throw new Error(`eval record: "${required}" is missing`);
  const values = metrics as SpecForgeMetrics<EvalMetricKey> & Record<'eval/avg_loss' | 'eval/simulated_acc_len', number>;
  return { phase: 'eval', step, ...values, ...(replay ? { replay: true } : {}) };
}

/** Online `speclab train`'s summary (the TrainSummary it writes to summary.json). */
export function summaryRecord(s: Omit<SummaryEntry, 'phase'>): SummaryEntry {
  return {
    phase: 'summary',
    target: s.target,
    trainSequences: s.trainSequences,
    steps: s.steps,
    trainSeconds: s.trainSeconds,
    finalLoss: s.finalLoss,
    vocabCoverage: s.vocabCoverage,
    ...(s.before && s.after && s.targetOnlyTokensPerSecond !== undefined
      ? { before: specEvals(s.before), after: specEvals(s.after), targetOnlyTokensPerSecond: s.targetOnlyTokensPerSecond }
      : {}),
    exportDir: s.exportDir,
    ...exportServing(s),
  };
}

/** The export's serving verdict, when the summary has one. */
function exportServing(s: { exportServable?: boolean; exportWarning?: string }): { exportServable?: boolean; exportWarning?: string } {
  return {
    ...(s.exportServable === undefined ? {} : { exportServable: s.exportServable }),
    ...(s.exportWarning === undefined ? {} : { exportWarning: s.exportWarning }),
  };
}

/** `speclab train --offline`'s summary (its OfflineTrainSummary). */
export function offlineSummaryRecord(s: Omit<OfflineSummaryEntry, 'phase'>): OfflineSummaryEntry {
  return {
    phase: 'summary',
    features: s.features,
    target: s.target,
    samples: s.samples,
    steps: s.steps,
    trainSeconds: s.trainSeconds,
    finalLoss: s.finalLoss,
    vocabCoverage: s.vocabCoverage,
    before: specEvals(s.before),
    after: specEvals(s.after),
    exportDir: s.exportDir,
    ...exportServing(s),
  };
}

/** Each member of the union `T` without key `K`. */
type OmitEach<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
/** A session event (training/session-types.ts SessionEvent). */
export type SessionEventValues = OmitEach<SessionEventEntry, 'event'>;

/** A session event under `event`, its `kind` kept (the log has always repeated it). */
export function sessionEventRecord(e: SessionEventValues): SessionEventEntry {
  switch (e.kind) {
    case 'phase':
      return { event: 'phase', kind: 'phase', phase: e.phase, detail: e.detail };
    case 'rollout':
      return { event: 'rollout', kind: 'rollout', round: e.round, samples: e.samples, seconds: e.seconds };
    case 'checkpoint':
      return { event: 'checkpoint', kind: 'checkpoint', step: e.step, acked: e.acked };
  }
}

/** Offline training resumed after `step`. */
export function resumeEventRecord(step: number): ResumeEventEntry {
  return { event: 'phase', phase: 'resume', step };
}
