/**
 * The settings, inputs and reports of an Eagle3TrainingSession (src/training/session/eagle3-session.ts),
 * apart from the session so that both read in one sitting.
 */
import { z } from 'zod';
import type { ControlStores } from '../../control/control-stores.ts';
import type { ReleasableFeatureStore } from '../../control/controller.ts';
import type { MetadataStore } from '../../control/metadata-store.ts';
import type { FeatureStore } from '../../data/feature-store.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { TargetModel } from '../../model/target/model.ts';
import type { DraftTargetTables } from '../../model/target/target-tables.ts';
import type { ProgressDisplay } from '../../ports/progress.ts';
import type { FileStore } from '../../ports/storage.ts';
import { SPECFORGE_OPTIMIZER } from '../../optim/adamw-backend.ts';
import type { ClusterWaitOptions } from './cluster-round.ts';
import type { SequenceSource } from '../sequences/eagle3-data.ts';
import type { EvalMetrics } from '../evaluation/held-out-eval.ts';
import type { PeriodicEvalSettings } from '../evaluation/periodic-eval.ts';
import { FEATURE_PRECISIONS } from '../loop/feature-precision.ts';
import type { StepLog } from '../loop/trainer-controller.ts';

const posInt = z.number().int().positive();

/** Every setting that shapes a session (and so must match when it resumes). */
// Upper bounds far beyond any useful run, so a typo (1e9 epochs, --lr 1e300) is refused at once
// naming the field instead of running for hours or training to NaN.
export const sessionSettingsSchema = z.object({
  epochs: posInt.max(10_000).default(6),
  roundPrompts: posInt.max(1_000_000).default(16),
  batchSize: posInt.max(65_536).default(4),
  tttLength: posInt.max(64).default(4),
  lr: z.number().positive().max(1).default(3e-3),
  warmupRatio: z.number().min(0).lt(1).default(0.05),
  maxGradNorm: z.number().positive().max(1e6).default(SPECFORGE_OPTIMIZER.maxGradNorm),
  draftVocabSize: posInt.max(4_194_304).optional(),
  auxLayers: z.array(z.number().int().nonnegative().max(1023)).length(3).optional(),
  responseLength: posInt.max(1_048_576).default(48),
  rolloutWorkers: posInt.max(8).default(1),
  checkpointEvery: posInt.max(1_000_000).default(8),
  seed: z
    .number()
    .int()
    .nonnegative()
    .max(2 ** 32 - 1)
    .default(0),
  featurePrecision: z.enum(FEATURE_PRECISIONS as ['f32', 'f16']).default('f32'),
  /**
   * What a rollout sends as the target: compact features ('hidden_state': the final hidden state with
   * each position's full-vocabulary logsumexp and argmax; the trainer projects it on the draft
   * vocabulary's lm_head rows) or the full-vocabulary logits ('logits', for parity tests and small targets).
   */
  targetRepr: z.enum(['hidden_state', 'logits']).default('hidden_state'),
  /**
   * Activation recompute in the draft's backward (model/eagle3/step-body.ts): 'on' keeps two [R, H]
   * tensors per TTT step and encodes each step's body again in the backward (same bits, about one more
   * forward of the step's body); 'auto' lets `speclab train`'s memory plan turn it on when the kept
   * activations do not fit and the recomputed ones do (elsewhere 'auto' is off).
   */
  recompute: z.enum(['auto', 'on', 'off']).default('auto'),
});
export type SessionSettings = z.infer<typeof sessionSettingsSchema>;

export interface SessionStorage {
  /** Checkpoints (`<runId>-step<N>/`) and `sequences.json`. */
  readonly checkpoints: FileStore;
  /** The durable ledger: file journal in Node/Deno, IndexedDB in a tab. */
  readonly metadata: MetadataStore;
  /** Feature spill: committed features survive a crash until their ack. */
  readonly spill?: FileStore;
}

export interface SessionStep extends StepLog {
  totalSteps: number;
  /** Per TTT step k: SpecForge's ploss_k and acc_k over this step's micro-batches. */
  plosses: number[];
  accs: number[];
  /** Simulated acceptance length Σ_k Π_{j≤k} acc_j. */
  simulatedAcceptance: number;
  /** Tokens this step trained on (every sample's real length, padding excluded). */
  tokens: number;
  /** Training tokens per second since the session opened (rollout included). */
  tokensPerSecond: number;
  checkpointed: boolean;
  /** Held-out metrics, on the steps the evaluation is due. */
  eval?: EvalMetrics;
}

export type SessionEvent =
  | { kind: 'phase'; phase: string; detail: string }
  | { kind: 'rollout'; round: number; samples: number; seconds: number }
  | { kind: 'checkpoint'; step: number; acked: number };

/** Training data: prompts the target continues (`settings.responseLength` tokens), or a dataset's own sequences. */
export interface SessionInputs extends SequenceSource {
  gpu: Gpu;
  /**
   * The target, or only its tables (model/target/target-tables.ts) for a cluster trainer that neither
   * generates nor evaluates; the draft borrows its embedding table on the GPU as its frozen embedding.
   */
  target: TargetModel | DraftTargetTables;
  /** Where long phases show their progress (generating the training data, capturing the held-out features). */
  progress?: ProgressDisplay;
  /** Held-out sequences scored every N steps (SessionStep.eval); none without it. */
  evaluation?: PeriodicEvalSettings;
  settings: SessionSettings;
  storage: SessionStorage;
  runId: string;
  now: () => number;
  onEvent?: (event: SessionEvent) => void;
  /**
   * Each optimizer step, awaited BEFORE the durable ack that covers it: a metrics log written here
   * holds every step a resume will not replay, even when the process dies right after the ack.
   */
  onStep?: (step: SessionStep) => Promise<void>;
  /** Rollout in other processes; without it this session runs `settings.rolloutWorkers` workers itself. */
  cluster?: SessionCluster;
}

/**
 * A trainer whose rollout runs elsewhere (docs/control-plane.md §9): the run's control plane is
 * shared (Redis), rollout processes capture into a shared feature store, and this session only
 * ingests rounds, waits for their commits and trains, in stream order (StreamOrderLease), so it
 * trains on the stream of the single-process run.
 */
export interface SessionCluster extends Omit<ClusterWaitOptions, 'now' | 'onProgress'> {
  /** The run's shared stores; `storage.metadata` must be `stores.metadata`. */
  readonly stores: ControlStores;
  /** Where rollout processes put features and this trainer gets them (a data-plane store on Redis). */
  readonly features: FeatureStore & ReleasableFeatureStore;
}

export interface ResumeReport {
  step: number;
  requeued: number;
  released: number;
}
