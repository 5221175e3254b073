/**
 * The lab worker's shared state and its few helpers: the GPU, the loaded model, the open training
 * session, the run flags and the IndexedDB stores. One object, so the worker's modules
 * (worker-model.ts, worker-run.ts, worker-spec.ts, worker-export.ts) read and change the same state.
 *
 * Storage (IndexedDB through src/platform/browser.ts, kept across reloads):
 *   speclab-lab              run.json (settings, model id, total steps), the run's per-step metrics
 *                            (metrics.json, ./run-metrics.ts) and the last export
 *   speclab-lab-checkpoints  the session's checkpoints and sequences.json
 *   speclab-lab-spill        committed features not yet acked (they survive a closed tab)
 *   speclab-lab-ledger       the IndexedDB metadata store: commits and the durable ack
 */
/// <reference lib="webworker" />
import { IndexedDbMetadataStore } from '../../src/control/indexeddb-metadata-store.ts';
import type { TargetModelConfig } from '../../src/config/hf-config.ts';
import type { ChatTokenizer } from '../../src/formats/tokenizer.ts';
import type { GpuContext } from '../../src/gpu/context.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import type { Eagle3DraftCheckpoint } from '../../src/inference/eagle3-drafter.ts';
import type { TargetModel } from '../../src/model/target/model.ts';
import { browserPlatform as platform } from '../../src/platform/browser.ts';
import type { Eagle3TrainingSession } from '../../src/training/session/eagle3-session.ts';
import type { PeriodicEvalSettings } from '../../src/training/evaluation/periodic-eval.ts';
import { resolveAuxLayers } from '../../src/training/sequences/draft-shape.ts';
import type { DataSummary, LabDataRef, Phase, Report } from './protocol.ts';
import type { ChatSample } from '../../src/corpus/chat-samples.ts';
import { readSavedRun as readSavedRunFrom, writeSavedRun as writeSavedRunTo, type SavedRun } from './saved-run.ts';

export { platform };

export const LAB_FILES = 'speclab-lab';
export const CHECKPOINTS = 'speclab-lab-checkpoints';
export const SPILL = 'speclab-lab-spill';
export const LEDGER = 'speclab-lab-ledger';
export const RUN_ID = 'lab';

export interface LoadedModel {
  id: string;
  config: TargetModelConfig;
  target: TargetModel;
  tokenizer: ChatTokenizer | undefined;
  train: number[][];
  heldOut: number[][];
  /** The held-out prompts as the page lists them. */
  heldText: string[];
}

/** Conversations brought to the tab (./worker-conversations.ts): every usable row in file order; the last `ref.heldOut` are held out. */
export interface LabData {
  ref: LabDataRef;
  samples: ChatSample[];
  summary: Omit<DataSummary, 'train' | 'held' | 'heldOut'>;
}

export interface LabState {
  ctx: GpuContext | undefined;
  gpu: Gpu | undefined;
  model: LoadedModel | undefined;
  session: Eagle3TrainingSession | undefined;
  /** The open session's held-out evaluation (its steps carry `eval` when it is due). */
  evaluation: PeriodicEvalSettings | undefined;
  metadata: IndexedDbMetadataStore | undefined;
  imported: { draft: Eagle3DraftCheckpoint; label: string } | undefined;
  /** Conversations brought to the tab (./worker-conversations.ts), or why the kept ones are refused. */
  data: LabData | undefined;
  dataError: string | undefined;
  running: boolean;
  pauseRequested: boolean;
  stopRequested: boolean;
  wake: (() => void) | undefined;
}

export const lab: LabState = {
  ctx: undefined,
  gpu: undefined,
  model: undefined,
  session: undefined,
  evaluation: undefined,
  metadata: undefined,
  imported: undefined,
  data: undefined,
  dataError: undefined,
  running: false,
  pauseRequested: false,
  stopRequested: false,
  wake: undefined,
};

const scope = self as unknown as DedicatedWorkerGlobalScope;

export function post(report: Report, transfer: Transferable[] = []): void {
  scope.postMessage(report, transfer);
}

export function phase(p: Phase, detail = ''): void {
  post({ type: 'phase', phase: p, detail });
}

export const labFiles = () => platform.files(LAB_FILES);
export const readSavedRun = () => readSavedRunFrom(labFiles());
export const writeSavedRun = (run: SavedRun) => writeSavedRunTo(labFiles(), run);

/** The one default rule of every command (defaultAuxLayerIds), small targets included. */
export function auxLayersFor(numLayers: number): number[] {
  return resolveAuxLayers(undefined, numLayers);
}

export async function ledger(): Promise<IndexedDbMetadataStore> {
  lab.metadata ??= await IndexedDbMetadataStore.open(platform, LEDGER);
  return lab.metadata;
}

export function closeSession(): void {
  lab.session?.destroy();
  lab.session = undefined;
  lab.evaluation = undefined;
}
