/**
 * Resuming from a training checkpoint (./train-checkpoint.ts holds the format): the checkpoint of the
 * durably acked step is loaded and restored into the backend, refused (fail closed, docs/durability.md
 * §8) when no checkpoint matches the acked step or when the run contract or optimizer drifted.
 */
import type { DurableMarker } from '../../control/metadata-store.ts';
import { SafetensorsFile } from '../../formats/safetensors.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { FileStore } from '../../ports/storage.ts';
import type { AdamWBackend } from '../../optim/adamw-backend.ts';
import { contractDrift, optimizerDrift, type RunContract } from './run-contract.ts';

import {
  COMPLETE_MARKER,
  CheckpointRefusedError,
  listCheckpoints,
  loadCheckpoint,
  stepFolders,
  type CheckpointRef,
  type LoadedCheckpoint,
  type TrainingState,
} from './train-checkpoint.ts';

export interface ResumeOptions {
  runId: string;
  /**
   * The durable marker of the run's metadata store (`await store.durableMarker()`). Omitted by a run
   * without a ledger (offline training: its data position is in the checkpoint itself, so the
   * checkpoint is its only durable record): then the newest complete checkpoint is used.
   */
  marker?: Pick<DurableMarker, 'globalStep' | 'optimizerDurable'>;
  /** The contract of the run that is resuming; must equal the saved one. */
  contract: RunContract;
}

export interface ResumeResult {
  readonly ref: CheckpointRef;
  readonly state: TrainingState;
  /** Saved non-trained buffers (e.g. t2d, d2t), decoded. */
  readonly buffers: SafetensorsFile;
}

/**
 * Find the latest complete checkpoint of `options.runId` (or, when the newest one ran ahead of the
 * durable ack, the one of the acked step; without a marker, the newest), check it against the durable
 * marker and the run contract, and restore weights, AdamW moments and the optimizer step into `backend` (whose
 * parameters must already be registered with the saved names and shapes). Returns undefined for a
 * fresh run (no checkpoint and no durable ack). The caller restores the trainer counters, epoch,
 * data position and RNG from the returned state.
 */
export async function resumeFromCheckpoint(
  store: FileStore,
  gpu: Gpu,
  backend: AdamWBackend,
  options: ResumeOptions,
): Promise<ResumeResult | undefined> {
  const complete = await listCheckpoints(store, options.runId);
  const ref = options.marker ? await ackedCheckpoint(store, options.runId, complete, options.marker) : complete.at(-1);
  if (!ref) return undefined;
  const loaded = await loadCheckpoint(store, ref);
  return restoreCheckpoint(store, gpu, backend, loaded, options);
}

/** The checkpoint the durable marker designates (undefined for a fresh run), or a refusal. */
async function ackedCheckpoint(
  store: FileStore,
  runId: string,
  complete: CheckpointRef[],
  marker: NonNullable<ResumeOptions['marker']>,
): Promise<CheckpointRef | undefined> {
  const options = { runId, marker };
  const ackStep = marker.globalStep;
  // A crash between a save and its ack leaves the newest checkpoint one step ahead of the ledger;
  // the checkpoint of the acked step (if kept) is then the consistent one. Acks ahead of every
  // checkpoint are never papered over.
  // A crash between the FIRST save and its ack: nothing is acked, so the run starts over (the
  // restarted run's first save replaces that folder).
  if ((ackStep ?? 0) === 0 && complete.length === 1 && complete[0].step > 0) return undefined;
  const ref = complete.find((r) => r.step === ackStep && r.step < (complete.at(-1)?.step ?? -1)) ?? complete.at(-1);
  if (!ref) {
    if (ackStep !== null && ackStep > 0) {
      throw new CheckpointRefusedError(
        `resume ${options.runId}: the metadata store has durably acked step ${ackStep} but ${store.root} holds no complete checkpoint of this run; refusing to replay acked samples against fresh weights`,
      );
    }
    return undefined;
  }
  const ackedFolder =
    ackStep !== null && ackStep > ref.step ? (await stepFolders(store, options.runId)).find((f) => f.step === ackStep) : undefined;
  if (ackedFolder)
    throw new CheckpointRefusedError(
      `resume ${options.runId}: the ledger durably acked step ${ackStep}, whose checkpoint is written first, but ${store.root}/${ackedFolder.dir} has no valid ${COMPLETE_MARKER} marker: that checkpoint was damaged after it was written, so this run is not resumable`,
    );
  if (ackStep !== ref.step) {
    throw new CheckpointRefusedError(
      `resume ${options.runId}: the durable ack step is ${ackStep === null ? 'unset' : ackStep} but the latest complete checkpoint (${store.root}/${ref.dir}) is step ${ref.step}; they must be equal (acks ran ahead of the checkpoint, or the checkpoint is from another ledger), so this run is not resumable`,
    );
  }
  if (!options.marker.optimizerDurable) {
    throw new CheckpointRefusedError(
      `resume ${options.runId}: the durable marker at step ${ackStep} was not written with optimizerDurable=true`,
    );
  }
  return ref;
}

/** Check `loaded` against the run contract and the model, then overwrite the backend's tensors and counters with it. */
function restoreCheckpoint(
  store: FileStore,
  gpu: Gpu,
  backend: AdamWBackend,
  loaded: LoadedCheckpoint,
  options: ResumeOptions,
): ResumeResult {
  const { state, ref } = loaded;
  const drift = [...contractDrift(state.contract, options.contract), ...optimizerDrift(state.optimizer, backend.config)];
  if (drift.length > 0)
    throw new CheckpointRefusedError(
      `resume ${options.runId} from ${store.root}/${ref.dir}: the run contract drifted (${drift.join('; ')})`,
    );

  const saved = new Map(state.parameters.map((p) => [p.name, p.shape]));
  const have = backend.params.map((p) => p.name);
  const missing = state.parameters.map((p) => p.name).filter((n) => !have.includes(n));
  const extra = have.filter((n) => !saved.has(n));
  if (missing.length || extra.length) {
    throw new CheckpointRefusedError(
      `resume ${options.runId} from ${store.root}/${ref.dir}: parameter keys drifted (${missing.length ? `in the checkpoint only: ${missing.join(', ')}` : ''}${missing.length && extra.length ? '; ' : ''}${extra.length ? `in this model only: ${extra.join(', ')}` : ''})`,
    );
  }
  for (const p of backend.params) {
    const shape = saved.get(p.name)!;
    if (shape.join() !== p.value.shape.join()) {
      throw new CheckpointRefusedError(
        `resume ${options.runId}: parameter ${p.name} is [${shape}] in ${store.root}/${ref.dir}, [${p.value.shape}] in this model`,
      );
    }
  }
  // Everything checked: now overwrite the GPU tensors (writes are ordered after queued work).
  for (const p of backend.params) {
    gpu.write(p.value, loaded.weights.f32(p.name));
    gpu.write(p.m, loaded.optimizer.f32(`${p.name}.m`));
    gpu.write(p.v, loaded.optimizer.f32(`${p.name}.v`));
  }
  backend.zeroGrad();
  backend.step = state.optimizerStep;
  backend.skippedSteps = state.skippedSteps ?? 0;
  return { ref, state, buffers: loaded.weights };
}
