/**
 * The end of a run: `<out>/summary.json` and its `summary` record (what the run trained, the
 * acceptance length before and after, the target's own speed, where the draft is), and the summary
 * lines printed to the terminal.
 */
import { summaryRecord } from '../../contracts/metrics-entries.ts';
import type { SpecEval } from '../../inference/evaluate-draft.ts';
import type { SpeedReport } from '../../inference/speculative.ts';
import type { FileStore } from '../../ports/storage.ts';
import { formatDuration } from '../../util/format.ts';
import type { RecordFn } from './run-log.ts';

export interface TrainSummary {
  target: string;
  trainSequences: number;
  steps: number;
  trainSeconds: number;
  finalLoss: number;
  vocabCoverage: number;
  /** The acceptance before and after training and the target's own speed: absent without held-out prompts (--eval-prompts 0). */
  before?: { heldOut: SpecEval; train?: SpecEval };
  after?: { heldOut: SpecEval; train?: SpecEval };
  targetOnlyTokensPerSecond?: number;
  exportDir: string;
  /** Whether SGLang and vLLM serve the export as trained, and why not (checkpoint-export.ts ExportServing). */
  exportServable: boolean;
  exportWarning?: string;
}

/** Writes summary.json and the summary record, then prints the summary (`started`: performance.now() at the run's start). */
export async function reportSummary(
  out: FileStore,
  summary: TrainSummary,
  base: SpeedReport | undefined,
  settings: { numDraftTokens: number; started: number; targetDir: string },
  record: RecordFn,
  print: (line: string) => void,
): Promise<void> {
  const { before, after } = summary;
  await out.writeAtomic('summary.json', new TextEncoder().encode(`${JSON.stringify(summary, null, 2)}\n`));
  await record(summaryRecord(summary));
  print('summary:');
  if (before && after && base) printAcceptance(before, after, base, settings.numDraftTokens, print);
  else
    print(
      `  acceptance length: not measured (--eval-prompts 0); measure the export where the target is: speclab eval --target ${settings.targetDir} --draft ${summary.exportDir} --prompts-file <prompts>`,
    );
  print(
    `  vocab coverage ${(summary.vocabCoverage * 100).toFixed(2)}%, ${summary.steps} steps, final loss ${summary.finalLoss.toFixed(4)}, total ${formatDuration((performance.now() - settings.started) / 1000)}`,
  );
  print(`  export: ${summary.exportDir}   metrics: ${out.root}/metrics.jsonl   checkpoints: ${out.root}/checkpoints`);
  if (summary.exportWarning) print(`  warning: the export is not servable as trained: ${summary.exportWarning}`);
}

type SpecEvals = NonNullable<TrainSummary['before']>;

function printAcceptance(
  before: SpecEvals,
  after: SpecEvals,
  base: SpeedReport,
  numDraftTokens: number,
  print: (line: string) => void,
): void {
  const speedup = (e: SpecEval, sp: SpeedReport) => (e.tokensPerSecond / sp.tokensPerSecond).toFixed(2);
  print(
    `  acceptance length (held-out):        ${before.heldOut.acceptanceLength.toFixed(3)} → ${after.heldOut.acceptanceLength.toFixed(3)}  (${numDraftTokens} draft tokens per verification, bonus included)`,
  );
  if (before.train && after.train)
    print(
      `  acceptance length (training prompts): ${before.train.acceptanceLength.toFixed(3)} → ${after.train.acceptanceLength.toFixed(3)}`,
    );
  print(
    `  decode tokens/s (held-out):          target only ${base.tokensPerSecond.toFixed(2)}; with untrained draft ${before.heldOut.tokensPerSecond.toFixed(2)} (${speedup(before.heldOut, base)}x); with trained draft ${after.heldOut.tokensPerSecond.toFixed(2)} (${speedup(after.heldOut, base)}x)`,
  );
  const lossless = [before.heldOut, after.heldOut, before.train, after.train].every((e) => e === undefined || e.lossless);
  print(
    `  lossless: ${lossless ? 'yes (speculative tokens equal target greedy tokens)' : 'NO — speculative output differs from target greedy decoding'}`,
  );
}
