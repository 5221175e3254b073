/** The input and the result of a GPU memory plan (./memory-plan.ts), and the adapter limits it checks. */
import type { Eagle3Config } from '../../config/eagle3-config.ts';
import type { TargetModelConfig } from '../../config/hf-config.ts';

export type Precision = 'f32' | 'f16';

/** The two adapter limits that bound one buffer (WebGPU reports no total memory). */
export interface AdapterLimits {
  readonly maxBufferSize: number;
  readonly maxStorageBufferBindingSize: number;
}

export interface MemoryPlanInput {
  readonly target: TargetModelConfig;
  readonly targetWeights: Precision;
  readonly draft: Eagle3Config;
  readonly batchSize: number;
  /** Longest training sequence in tokens (prompt plus reply): the S of every [B, S, …] tensor. */
  readonly maxLength: number;
  readonly tttLength: number;
  /** Precision of the captured features (hidden_state, target) in the store and the batch. */
  readonly features: Precision;
  /**
   * What a sample's `target` holds: the full-vocabulary logits, or (compact features, the default of a
   * run) the target's final hidden state with a per-position logsumexp and argmax. Absent: 'logits'.
   */
  readonly targetRepr?: 'logits' | 'hidden_state';
  /** Samples resident in the feature store at once (the session rolls out a round, then trains on it). */
  readonly featureStoreSamples: number;
  /** Tokens per batched target forward while capturing (TargetFeatureSource's maxBatchTokens). */
  readonly captureBatchTokens: number;
  /** Sequences per batched generation (continueWithTarget's chunk); 0 when the data needs none. */
  readonly generationBatch: number;
  /**
   * Held-out sequences the periodic evaluation (--eval-every) captures once and keeps on the GPU for
   * the whole run, collated in batches of batchSize; 0 (or absent) without it.
   */
  readonly heldOutSequences?: number;
  /** Target layers whose outputs feed the draft (3 for EAGLE3). */
  readonly auxLayers?: number;
  /** Activation recompute (model/eagle3/step-body.ts): each TTT step keeps h_out; one step's body at a time. */
  readonly recompute?: boolean;
}

export interface PlanItem {
  readonly key: ItemKey;
  readonly label: string;
  readonly bytes: number;
  /** What it is made of, in words with numbers. */
  readonly detail: string;
}

export type ItemKey =
  | 'targetWeights'
  | 'targetKv'
  | 'targetGeneration'
  | 'targetCapture'
  | 'featureStore'
  | 'heldOut'
  | 'batch'
  | 'staging'
  | 'draftWeights'
  | 'gradients'
  | 'moments'
  | 'draftFrozen'
  | 'drafter'
  | 'activations'
  | 'scratch'
  /** A rollout process's read-back buffer for the sample it sends (./memory-plan-roles.ts). */
  | 'sampleReadback'
  /** A cluster trainer's sample, uploaded from the run's feature store to be copied into the batch (./memory-plan-roles.ts). */
  | 'sampleBeingBatched';

/** The items of the draft's training step itself (what a step on a given batch allocates). */
export const DRAFT_STEP_ITEMS: readonly ItemKey[] = ['draftWeights', 'gradients', 'moments', 'draftFrozen', 'activations', 'scratch'];

/** The phases a run goes through, one at a time (./memory-plan-phases.ts). */
export type PlanPhase = 'generation' | 'capture' | 'batching' | 'step';

export interface PhaseTotal {
  readonly phase: PlanPhase;
  /** Every item the phase holds, summed. */
  readonly bytes: number;
}

export interface MemoryPlan {
  readonly input: MemoryPlanInput;
  readonly items: readonly PlanItem[];
  /** What each phase holds; the total is the largest. */
  readonly phases: readonly PhaseTotal[];
  /** The largest phase (./memory-plan-phases.ts): what the device holds at most. */
  readonly totalBytes: number;
  readonly largest: PlanItem;
  readonly budgetBytes: number | undefined;
  readonly limits: AdapterLimits;
  /** Bytes one binding may hold: min(maxStorageBufferBindingSize, maxBufferSize). */
  readonly maxBindingBytes: number;
  readonly fits: boolean;
  /** Why it does not fit, one sentence each (over budget, a tensor no binding can hold). */
  readonly problems: readonly string[];
  /** Tensors split into row parts to fit a binding. */
  readonly notes: readonly string[];
  /** What to lower, with the total each change gives. */
  readonly suggestions: readonly string[];
}
