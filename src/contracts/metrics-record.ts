/**
 * One line of a run's `metrics.jsonl`, the log `speclab train` (online and `--offline`) appends as it
 * runs and the lab draws: a `time` stamp, then one record. The records, in the order a run writes them:
 *
 *   config       the run's settings as validated (TrainConfig), with `target` the resolved target dir
 *   data         sequences, tokens, held-out prompts and the draft vocabulary's coverage
 *   eval-before  speculative decoding with the untrained draft (`heldOut`, and `train` when evaluated)
 *   train        one optimizer step; online also SpecForge's `train/…` keys; `replay` on a step an
 *                earlier process logged and a resume trains again
 *   eval         the held-out evaluation of a step under SpecForge's `eval/…` keys (online, --eval-every)
 *   eval-after   as eval-before, with the exported draft
 *   summary      the run's summary.json (online and offline ones differ)
 *   {event: …}   the online session's events (`kind` repeats `event`), and offline's resume
 *
 * Writers build records with the constructors of ./metrics-entries.ts (typed: a field the schema lacks
 * does not compile, a SpecForge key it lacks throws) and its `metricsLine`; readers parse with the
 * schemas here (`parseMetricsLine` exactly, or a view of `TrainFields` / `EvalFields`). A
 * number that is not finite (a skipped step's gradient norm) is written by JSON as null and read
 * back as NaN. Self-contained: zod only.
 */
import { z } from 'zod';

const numberError = (iss: { input?: unknown }) => (iss.input === undefined ? 'is missing' : 'is not a number');
/** A metric: JSON writes NaN and ±Infinity as null, read back as NaN. */
const Num = z
  .number({ error: numberError })
  .nullable()
  .transform((v) => v ?? Number.NaN);
const Count = z.number({ error: numberError }).int({ error: 'is not a whole number' }).nonnegative({ error: 'is negative' });
const Nums = z.array(Num, { error: (iss) => (iss.input === undefined ? 'is missing' : 'is not an array of numbers') });
const Text = z.string({ error: (iss) => (iss.input === undefined ? 'is missing' : 'is not a string') });
const Flag = z.boolean({ error: (iss) => (iss.input === undefined ? 'is missing' : 'is not true or false') });
const Replay = { replay: z.literal(true).optional() };
const Time = z.iso.datetime({ error: (iss) => (iss.input === undefined ? 'is missing' : 'is not an ISO time') });
/** The line of a record: its `time` stamp (written first) and the record. */
const lineOf = <Shape extends z.ZodRawShape>(entry: z.ZodObject<Shape>) => entry.extend({ time: Time });

// ——— SpecForge's metric keys (src/training/evaluation/metric-keys.ts writes them, its table says what they mean) ———

const Index = z.number().int().nonnegative();
export const TrainMetricKey = z.union([
  z.literal(['train/loss', 'train/acc', 'train/acceptance_rate', 'train/lr', 'train/grad_norm', 'train/simulated_acc_len']),
  z.templateLiteral(['train/acc_', Index]),
  z.templateLiteral(['train/ploss_', Index]),
  z.templateLiteral(['train/acceptance_rate_', Index]),
]);
export type TrainMetricKey = z.output<typeof TrainMetricKey>;

export const EvalMetricKey = z.union([
  z.literal(['eval/avg_loss', 'eval/avg_acc', 'eval/simulated_acc_len']),
  z.templateLiteral(['eval/per_position_acc/', Index]),
  z.templateLiteral(['eval/acceptance_rate_', Index]),
  z.templateLiteral(['eval/ploss_', Index]),
]);
export type EvalMetricKey = z.output<typeof EvalMetricKey>;

/** The SpecForge keys of a train or eval record, flat beside its own fields. */
export type SpecForgeMetrics<K extends string> = { [key in K]?: number };

// ——— The records (entries: a line without its time) ———

const SpecEvalShape = z.strictObject({
  acceptanceLength: Num,
  verifications: Count,
  acceptedDraftTokens: Count,
  tokensPerSecond: Num,
  /** Absent when sampled (one sampled run proves nothing either way). */
  lossless: Flag.optional(),
});
/** Speculative decoding with one draft on one prompt set (inference/evaluate-draft.ts SpecEval). */
export type SpecEval = z.output<typeof SpecEvalShape>;
/** The held-out prompts' evaluation and the training prompts' (when any were evaluated). */
const SpecEvalsShape = z.strictObject({ heldOut: SpecEvalShape, train: SpecEvalShape.optional() });
export type SpecEvals = z.output<typeof SpecEvalsShape>;

/** The settings are TrainConfig's (validated by cli/train.ts trainConfigSchema); not spelled again here. */
export const ConfigEntry = z.looseObject({ phase: z.literal('config'), target: Text });
export type ConfigEntry = { phase: 'config'; target: string } & Readonly<Record<string, unknown>>;

export const DataEntry = z.strictObject({
  phase: z.literal('data'),
  trainSequences: Count,
  trainTokens: Count,
  heldOut: Count,
  draftVocabSize: Count,
  distinctTokens: Count,
  vocabCoverage: Num,
});
export type DataEntry = z.output<typeof DataEntry>;

export const EvalBeforeEntry = z.strictObject({ phase: z.literal('eval-before'), ...SpecEvalsShape.shape });
export const EvalAfterEntry = z.strictObject({ phase: z.literal('eval-after'), ...SpecEvalsShape.shape });
export type EvalBeforeEntry = z.output<typeof EvalBeforeEntry>;
export type EvalAfterEntry = z.output<typeof EvalAfterEntry>;

/** The train record's own fields; its SpecForge keys come after them (TrainEntry). */
export const TrainFields = z.strictObject({
  phase: z.literal('train'),
  step: Count,
  totalSteps: Count,
  /** Σ_k 0.8ᵏ ploss_k. */
  loss: Num,
  /** Per TTT position k. */
  plosses: Nums,
  accs: Nums,
  /** Σ_k Π_{j≤k} acc_j, without the bonus token. */
  simulatedAcceptance: Num,
  lr: Num,
  /** The pre-clip gradient norm; null (NaN) on a step the non-finite guard skipped. */
  gradNorm: Num,
  samples: Count,
  tokensPerSecond: Num,
  checkpointed: Flag,
  /** Since the process started. */
  elapsedSeconds: Num,
  ...Replay,
});
export type TrainEntry = z.output<typeof TrainFields> & SpecForgeMetrics<TrainMetricKey>;
/** What a writer gives `trainRecord`: the step's values. */
export type TrainValues = Omit<z.output<typeof TrainFields>, 'phase' | 'replay'>;

/** The eval record's own fields; its values are SpecForge's `eval/…` keys (`evalRecordValues` reads them). */
export const EvalFields = z.strictObject({
  phase: z.literal('eval'),
  step: Count,
  'eval/avg_loss': Num,
  'eval/avg_acc': Num.optional(),
  'eval/simulated_acc_len': Num,
  ...Replay,
});
export type EvalEntry = z.output<typeof EvalFields> & SpecForgeMetrics<EvalMetricKey>;

const SummaryCommon = {
  steps: Count,
  trainSeconds: Num,
  /** The last logged step's loss (a resume with no step left keeps it). */
  finalLoss: Num,
  vocabCoverage: Num,
};
/**
 * Whether SGLang and vLLM serve the export as trained (model/eagle3/serving-layers.ts), and why not:
 * false only for a target too small to have three capturable aux layers (otherwise the run is refused).
 * Absent in summaries written before it was recorded.
 */
const ExportServing = {
  exportServable: z.boolean().optional(),
  exportWarning: Text.optional(),
};
/** Online `speclab train`'s summary (its summary.json), keys in the order it writes them. */
export const SummaryEntry = z.strictObject({
  phase: z.literal('summary'),
  target: Text,
  trainSequences: Count,
  ...SummaryCommon,
  // Absent when the run measured no acceptance (--eval-prompts 0).
  before: SpecEvalsShape.optional(),
  after: SpecEvalsShape.optional(),
  targetOnlyTokensPerSecond: Num.optional(),
  exportDir: Text,
  ...ExportServing,
});
/** `speclab train --offline`'s summary. */
export const OfflineSummaryEntry = z.strictObject({
  phase: z.literal('summary'),
  features: Text,
  target: Text,
  samples: Count,
  ...SummaryCommon,
  before: SpecEvalsShape,
  after: SpecEvalsShape,
  exportDir: Text,
  ...ExportServing,
});
export type SummaryEntry = z.output<typeof SummaryEntry>;
export type OfflineSummaryEntry = z.output<typeof OfflineSummaryEntry>;

/** The online session's events (training/session-types.ts SessionEvent), written `{ event: kind, ...event }`. */
const SessionEvents = [
  z.strictObject({ event: z.literal('phase'), kind: z.literal('phase'), phase: Text, detail: Text }),
  z.strictObject({ event: z.literal('rollout'), kind: z.literal('rollout'), round: Count, samples: Count, seconds: Num }),
  z.strictObject({ event: z.literal('checkpoint'), kind: z.literal('checkpoint'), step: Count, acked: Count }),
] as const;
const eventKindError = { error: 'is not a session event (phase, rollout or checkpoint)' };
export const SessionEventEntry = z.discriminatedUnion('kind', SessionEvents, eventKindError);
export type SessionEventEntry = z.output<typeof SessionEventEntry>;
/** Offline training resumed after `step` (the online session says so as a `phase` event with a detail). */
export const ResumeEventEntry = z.strictObject({ event: z.literal('phase'), phase: z.literal('resume'), step: Count });
export type ResumeEventEntry = z.output<typeof ResumeEventEntry>;

/** Every record a `metrics.jsonl` line holds, without its time. */
export type MetricsEntry =
  | ConfigEntry
  | DataEntry
  | EvalBeforeEntry
  | TrainEntry
  | EvalEntry
  | EvalAfterEntry
  | SummaryEntry
  | OfflineSummaryEntry
  | SessionEventEntry
  | ResumeEventEntry;
/** A parsed `metrics.jsonl` line. */
export type MetricsRecord = MetricsEntry & { time: string };

// ——— Parsing ———

/** A record whose SpecForge keys (`key`) sit beside its own fields: any other key is refused. */
function withMetricKeys<Shape extends z.ZodRawShape>(fields: z.ZodObject<Shape>, key: z.ZodType, kind: string) {
  return fields
    .extend({ time: Time })
    .catchall(Num)
    .superRefine((record, ctx) => {
      for (const k of Object.keys(record))
        if (!(k in fields.shape) && k !== 'time' && !key.safeParse(k).success)
          ctx.addIssue({ code: 'custom', path: [k], message: `is not a field of a ${kind} record` });
    });
}

/** One loss and one accuracy per TTT position. */
export function checkPositions(record: { plosses?: number[]; accs?: number[] }, ctx: z.RefinementCtx): void {
  const { plosses, accs } = record;
  if (plosses && accs && plosses.length !== accs.length)
    ctx.addIssue({ code: 'custom', path: [], message: `${plosses.length} plosses for ${accs.length} accs` });
}

/** The exact line of each record kind, as the writers write it. */
export const MetricsLine = {
  config: lineOf(ConfigEntry),
  data: lineOf(DataEntry),
  'eval-before': lineOf(EvalBeforeEntry),
  train: withMetricKeys(TrainFields, TrainMetricKey, 'train').superRefine(checkPositions),
  eval: withMetricKeys(EvalFields, EvalMetricKey, 'eval'),
  'eval-after': lineOf(EvalAfterEntry),
  summary: lineOf(SummaryEntry),
  'offline-summary': lineOf(OfflineSummaryEntry),
  'session-event': z.discriminatedUnion(
    'kind',
    [lineOf(SessionEvents[0]), lineOf(SessionEvents[1]), lineOf(SessionEvents[2])],
    eventKindError,
  ),
  'resume-event': lineOf(ResumeEventEntry),
} as const;

const PHASES = ['config', 'data', 'eval-before', 'train', 'eval', 'eval-after'] as const;

/** The record kind a JSON object says it is (by `event`, `kind`, `phase`, and which summary), or undefined. */
export function metricsRecordKind(record: Readonly<Record<string, unknown>>): keyof typeof MetricsLine | undefined {
  if ('event' in record) return 'kind' in record ? 'session-event' : 'resume-event';
  if (record.phase === 'summary') return 'features' in record ? 'offline-summary' : 'summary';
  return PHASES.find((phase) => phase === record.phase);
}

/** A zod error as one line: the first issue, with the field it is about (`"accs[1]" is not a number`). */
export function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (issue.code === 'unrecognized_keys')
    return `${issue.keys.map((k) => `"${k}"`).join(', ')} ${issue.keys.length === 1 ? 'is not a field' : 'are not fields'} of this record`;
  const path = issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
  return path ? `"${path}" ${issue.message}` : issue.message;
}

/** One `metrics.jsonl` record, checked exactly (every field, no other); throws naming `where` and the field. */
export function parseMetricsRecord(value: unknown, where: string): MetricsRecord {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${where}: not a JSON object`);
  const kind = metricsRecordKind(value as Record<string, unknown>);
  if (!kind) {
    const phase = (value as { phase?: unknown }).phase;
    throw new Error(`${where}: not a metrics record (${phase === undefined ? 'no "phase" or "event"' : `phase ${JSON.stringify(phase)}`})`);
  }
  const parsed = MetricsLine[kind].safeParse(value);
  if (!parsed.success) throw new Error(`${where}: ${describeIssue(parsed.error)}`);
  return parsed.data as MetricsRecord;
}

/** One line of a `metrics.jsonl` (text without its newline), parsed and checked exactly. */
export function parseMetricsLine(line: string, where: string): MetricsRecord {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    throw new Error(`${where}: not JSON (${(err as Error).message})`, { cause: err });
  }
  return parseMetricsRecord(value, where);
}

/** The arrays behind an eval record's indexed SpecForge keys, as the lab draws them. */
export interface EvalValues {
  step: number;
  /** `eval/avg_loss`: Σ_k 0.8ᵏ ploss_k. */
  loss: number;
  plosses: number[];
  accs: number[];
  acceptanceRates: number[];
  /** `eval/simulated_acc_len`: Σ_k Π_{j≤k} acc_j, WITHOUT the bonus token. */
  simulatedAcceptance: number;
}

/** An eval record's values; each indexed key is read from position 0 while present. */
export function evalRecordValues(record: Pick<EvalEntry, 'step' | 'eval/avg_loss' | 'eval/simulated_acc_len'>): EvalValues {
  const keys: Readonly<Record<string, unknown>> = record;
  const indexed = (prefix: string): number[] => {
    const out: number[] = [];
    for (let k = 0; typeof keys[`${prefix}${k}`] === 'number'; k++) out.push(keys[`${prefix}${k}`] as number);
    return out;
  };
  return {
    step: record.step,
    loss: record['eval/avg_loss'],
    plosses: indexed('eval/ploss_'),
    accs: indexed('eval/per_position_acc/'),
    acceptanceRates: indexed('eval/acceptance_rate_'),
    simulatedAcceptance: record['eval/simulated_acc_len'],
  };
}
