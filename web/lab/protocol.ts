/**
 * Messages between the lab page (main thread: UI only) and its Web Worker (every GPU, storage and
 * training call). Plain structured-clone data; File objects pass through as they are.
 */
import type { AdapterRecord } from '../../src/gpu/context.ts';
import type { ControllerStatus } from '../../src/control/controller.ts';
import type { TargetModelConfig } from '../../src/config/hf-config.ts';
import type { AdapterLimits } from '../../src/training/run/memory-plan.ts';
import type { EvalValues, TrainEntry } from '../../src/contracts/metrics-record.ts';
import type { LabInsight } from './insight-view.ts';
import type { CachedHubModel } from '../../src/platform/browser-hub.ts';

/** What a visitor chooses before starting a run. */
export interface LabSettings {
  tttLength: number;
  draftVocabSize: number;
  batchSize: number;
  lr: number;
  rolloutWorkers: number;
  epochs: number;
  trainPrompts: number;
  responseLength: number;
}

/** Sequences rolled out per round (the feature store holds one round). */
export const LAB_ROUND_PROMPTS = 16;

/** The adapter's two buffer limits from a GpuContext limit record (the plan checks them). */
export function adapterLimitsOf(limits: Readonly<Record<string, number>>): AdapterLimits {
  return { maxBufferSize: limits.maxBufferSize, maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize };
}

export const DEFAULT_SETTINGS: LabSettings = {
  tttLength: 4,
  draftVocabSize: 1024,
  batchSize: 4,
  lr: 3e-3,
  rolloutWorkers: 1,
  epochs: 6,
  trainPrompts: 32,
  responseLength: 48,
};

export type Command =
  /** `search`: the page's query (?SPECLAB_DEFAULT_LIMITS=1, ?SPECLAB_FEATURE_LEVEL=compatibility), which a worker's own address lacks. */
  | { type: 'init'; labTargetUrl: string; search: string }
  | { type: 'start'; settings: LabSettings }
  | { type: 'continue' }
  | { type: 'pause' }
  | { type: 'resume' }
  | { type: 'stop' }
  | { type: 'discard' }
  | { type: 'load-model-url'; url: string }
  /** A picked or dropped folder: each File with its path inside the folder (made on the page: a drop can only be read there). */
  | { type: 'load-model-files'; files: { file: File; path: string }[]; folder?: string }
  | { type: 'spec-run'; prompt: number; maxNewTokens: number; numDraftTokens: number; sampling: SpecSampling }
  | { type: 'export' }
  | { type: 'import'; files: File[] }
  /** Capture the draft insight of held-out sample `sample` now (./worker-insight.ts); it is followed from then on. */
  | { type: 'insight'; sample: number; topK: number }
  /** A dropped or picked conversation file (./worker-conversations.ts); `heldOut` absent: a fifth of its rows. */
  | { type: 'load-data'; file: File; heldOut?: number }
  | { type: 'data-held-out'; heldOut: number }
  | { type: 'clear-data' }
  /** A Hugging Face id: from the tab's cache, else downloaded into it (src/platform/browser-hub.ts); the token is not kept. */
  | { type: 'load-model-hub'; id: string; token: string }
  | { type: 'remove-cached-model'; repo: string };

/** Which conversation file a run trains on: its name, size and CRC-32, and how many of its last rows are held out. */
export interface LabDataRef {
  file: string;
  bytes: number;
  crc32: number;
  heldOut: number;
}

/** A conversation file as the page shows it: the summary `speclab train --data` prints, and the split. */
export interface DataSummary {
  file: string;
  rows: number;
  usable: number;
  /** The first skipped rows with their reasons; `skippedCount` counts them all. */
  skipped: { line: number; reason: string }[];
  skippedCount: number;
  truncated: number;
  lossTokens: number;
  template: string;
  maxLength: number;
  train: number;
  held: number;
  heldOut: number;
}

export type Phase = 'idle' | 'loading' | 'data' | 'training' | 'paused' | 'stopped' | 'done' | 'error';

/**
 * One optimizer step as the page draws it: the fields of a `metrics.jsonl` train record
 * (src/contracts/metrics-record.ts) that the charts use, `total` its totalSteps. The worker makes it
 * from the session's step; ./metrics.ts reads it from a CLI log.
 */
export type StepReport = Pick<
  TrainEntry,
  'step' | 'loss' | 'plosses' | 'accs' | 'simulatedAcceptance' | 'tokensPerSecond' | 'lr' | 'checkpointed'
> & { total: TrainEntry['totalSteps'] };

/**
 * The draft scored on the held-out prompts (continued by the target), on the steps it is due: the
 * values of a `metrics.jsonl` eval record (`simulatedAcceptance` WITHOUT the bonus token: the page
 * shows 1 + it, metrics.ts acceptanceLength), and what the lab knows beside them.
 */
export interface EvalReport extends EvalValues {
  /** Evaluated every this many optimizer steps, and at the last (0: not known, as in a CLI log). */
  every: number;
  /** Held-out sequences and the loss-masked tokens scored at TTT position 0 (0: not known). */
  sequences: number;
  lossTokens: number;
}

export interface RunStatus {
  controller: ControllerStatus;
  residentBytes: number;
  spillBytes: number;
  round: number;
  rounds: number;
}

/** One optimizer step as the charts draw it; `status` is the worker's (a CLI log has none). */
export interface MetricPoint {
  step: StepReport;
  status?: RunStatus;
  eval?: EvalReport;
}

/** Speculative sampling of the "Try the draft" panel: temperature 0 is greedy (top-p, top-k and seed unused). */
export interface SpecSampling {
  temperature: number;
  topP: number;
  /** 0 = no top-k limit. */
  topK: number;
  seed: number;
}

export interface SpecStats {
  acceptance: number;
  /** Greedy: the output equals target-only greedy decoding. Sampled: undefined (the guarantee is the rejection rule's). */
  lossless: boolean | undefined;
  sampled: boolean;
  tpsDraft: number;
  tpsTarget: number;
  text: string;
  targetText: string;
  draftSource: string;
}

export type Report =
  | { type: 'adapter'; record: AdapterRecord }
  | { type: 'gpu-error'; message: string }
  | { type: 'phase'; phase: Phase; detail: string }
  | {
      type: 'saved-run';
      step: number;
      total: number;
      settings: LabSettings;
      model: string;
      /** The conversations it trains on (absent: the bundled prompts). */
      data?: LabDataRef;
      finished: boolean;
      acked: number;
      committed: number;
    }
  | { type: 'no-saved-run' }
  /** run.json failed its seal or its shape check: nothing can continue it; Discard clears it. */
  | { type: 'damaged-run'; message: string }
  /** `eval` on the steps the held-out evaluation ran. */
  | { type: 'step'; step: StepReport; status: RunStatus; eval?: EvalReport }
  | { type: 'status'; status: RunStatus; step: number; total: number }
  | {
      type: 'model';
      state: 'loading' | 'ready' | 'error';
      message: string;
      loaded?: number;
      total?: number;
      /** The model's id, when ready. */ id?: string;
    }
  | { type: 'prompts'; heldOut: string[] }
  /** The loaded target and the adapter, for the page's GPU memory plan (memory-plan.ts). */
  | {
      type: 'memory-basis';
      target: TargetModelConfig;
      trainPromptLengths: number[];
      /** With conversations: each training row's whole length (no reply is generated). */
      sequenceLengths?: number[];
      heldOut: number;
      roundPrompts: number;
      limits: AdapterLimits;
    }
  | { type: 'spec-token'; text: string; draft: boolean; first: boolean }
  | { type: 'spec-done'; stats: SpecStats }
  | { type: 'spec-error'; message: string }
  /** The export of the draft after optimizer step `step`. */
  | { type: 'export-files'; files: { name: string; bytes: Uint8Array }[]; step: number }
  | { type: 'import'; state: 'ready' | 'error'; message: string }
  /** A long data phase: `done` of `total` prompts continued by the target, `elapsedMs` since it began. */
  | { type: 'progress'; task: 'held-out' | 'prompts'; done: number; total: number; elapsedMs: number }
  /** The saved run's steps up to the step it continues from (./run-metrics.ts), for the charts after a reload. */
  | { type: 'history'; points: MetricPoint[] }
  /** One held-out sample as the draft saw it after optimizer step `insight.globalStep` (docs/insight.md). */
  | { type: 'insight'; insight: LabInsight }
  /** The conversations: loaded (with their summary), none (the bundled prompts), or a refusal naming the file and line. */
  | { type: 'data'; state: 'ready' | 'none' | 'error'; message: string; summary?: DataSummary }
  /** The models in the tab's Hugging Face cache (after init, a download, a removal). */
  | { type: 'hub-cache'; models: CachedHubModel[] }
  | { type: 'error'; message: string };
