/**
 * What the online session (eagle3-session.ts) and offline training (offline-training.ts) share about
 * a run that lives across processes: the checkpoint of a step (self-contained: `eagle3RunExtras`),
 * when one is due, and the per-step EAGLE3 metrics both report.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { AdamWBackend } from '../../optim/adamw-backend.ts';
import type { FileStore } from '../../ports/storage.ts';
import type { TensorToWrite } from '../../formats/safetensors-writer.ts';
import type { RunContract } from './run-contract.ts';
import { saveCheckpoint, type CheckpointRef } from './train-checkpoint.ts';

/** The run id of `speclab train`'s checkpoints (online and offline): `<out>/checkpoints/speclab-train-step<N>`. */
export const TRAIN_RUN_ID = 'speclab-train';

export interface RunCheckpointOptions {
  runId: string;
  globalStep: number;
  microStep: number;
  /** Samples trained through this step over the whole stream. */
  samplesConsumed: number;
  contract: RunContract;
  /** `eagle3RunExtras(...)`. */
  extras: { extra: Record<string, unknown>; buffers: Record<string, TensorToWrite> };
}

/**
 * Save step `globalStep` of a run that draws one stream across its epochs: the epoch fields count
 * the whole run (epoch 0, `epochBatch` = the step), and the extras make the checkpoint self-contained.
 */
export function saveRunCheckpoint(store: FileStore, gpu: Gpu, backend: AdamWBackend, o: RunCheckpointOptions): Promise<CheckpointRef> {
  return saveCheckpoint(store, gpu, backend, {
    runId: o.runId,
    globalStep: o.globalStep,
    microStep: o.microStep,
    epoch: 0,
    data: { epochBatch: o.globalStep, epochSamples: o.samplesConsumed, samplesConsumed: o.samplesConsumed },
    contract: o.contract,
    ...o.extras,
  });
}

/** A checkpoint is due every `every` steps, and at the last step of the run. */
export function checkpointDue(step: number, every: number, totalSteps: number): boolean {
  return step % every === 0 || step === totalSteps;
}

/** Per TTT step k: SpecForge's ploss_k and acc_k over a step's micro-batches, and the simulated acceptance length Σ_k Π_{j≤k} acc_j. */
export function eagle3StepMetrics(
  metrics: Readonly<Record<string, number>>,
  tttLength: number,
): { plosses: number[]; accs: number[]; simulatedAcceptance: number } {
  const plosses = Array.from({ length: tttLength }, (_, k) => metrics[`ploss_num_${k}`] / Math.max(metrics[`ploss_den_${k}`], 1e-6));
  const accs = Array.from({ length: tttLength }, (_, k) => metrics[`correct_${k}`] / Math.max(metrics[`denom_${k}`], 1e-6));
  let prod = 1;
  let simulatedAcceptance = 0;
  for (const a of accs) simulatedAcceptance += prod *= a;
  return { plosses, accs, simulatedAcceptance };
}
