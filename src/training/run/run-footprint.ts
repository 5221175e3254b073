/**
 * What a run writes and sends besides its GPU memory, from the same settings as its memory plan:
 *   - one training sample as the rollout stores and sends it (the feature store, the spill file, the
 *     cluster's data plane): hidden_state [S, A·H] and the target, either its final hidden state [S, H]
 *     with a logsumexp and argmax per position (compact features) or its logits over the full vocabulary
 *     [S, V], in the feature precision, input_ids and loss_mask [S] i32 (src/inference/target-feature-source.ts);
 *   - one checkpoint (src/training/checkpoints/train-checkpoint.ts): weights.safetensors (the draft's
 *     f32 weights, and the t2d/d2t maps of eagle3RunExtras) and optimizer.safetensors (AdamW m and v,
 *     f32), sized exactly as writeSafetensors lays them out; state.json and COMPLETE (small JSON
 *     files) are not counted. Two checkpoints are kept (the newest and the one before);
 *   - the cadence `speclab train` writes them at (the session's rule, eagle3-session.ts): every
 *     --checkpoint-every steps, at the end of every round, and at the last step;
 *   - the spill: a colocated run writes every committed sample to `<out>/spill` until its ack, at most
 *     one round; a cluster run's Redis holds at most two rounds (the one training and the next, which
 *     the rollout processes capture meanwhile).
 * Pure: no GPU, no files.
 */
import { eagle3ParameterShapes, type Eagle3Config } from '../../config/eagle3-config.ts';
import { SAFETENSORS_DTYPE_BYTES, type SafetensorsDType } from '../../formats/safetensors.ts';
import { BYTES_PER_ELEMENT } from '../../gpu/tensor.ts';
import type { MemoryPlanInput } from './memory-plan-types.ts';

/**
 * Bytes of one training sample, as stored and sent: its float features in the feature precision
 * (aux hidden states, and the target: full logits, or with compact features the final hidden state),
 * input_ids and loss_mask i32, and with compact features the per-position logsumexp (f32) and argmax (i32).
 */
export function sampleBytes(x: MemoryPlanInput): number {
  const aux = x.auxLayers ?? 3;
  const S = x.maxLength;
  const compact = x.targetRepr === 'hidden_state';
  const targetWidth = compact ? x.target.hiddenSize : x.target.vocabSize;
  const perToken = (compact ? 4 : 2) * BYTES_PER_ELEMENT.i32; // ids, mask (+ lse f32, argmax i32)
  return S * (aux * x.target.hiddenSize + targetWidth) * BYTES_PER_ELEMENT[x.features] + S * perToken;
}

interface Entry {
  readonly name: string;
  readonly dtype: SafetensorsDType;
  readonly shape: readonly number[];
}

/** The byte size of the file writeSafetensors writes for `entries` (in order) and `metadata`. */
export function safetensorsFileBytes(entries: readonly Entry[], metadata?: Record<string, string>): number {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const e of entries) {
    const bytes = e.shape.reduce((a, d) => a * d, 1) * SAFETENSORS_DTYPE_BYTES[e.dtype];
    header[e.name] = { dtype: e.dtype, shape: e.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header)).length;
  return 8 + Math.ceil(json / 8) * 8 + offset;
}

export interface CheckpointSize {
  readonly bytes: number;
  readonly weightsFile: number;
  readonly optimizerFile: number;
}

/** One checkpoint's two safetensors files for `draft`, as saveCheckpoint writes them. */
export function checkpointSize(draft: Eagle3Config): CheckpointSize {
  const params = eagle3ParameterShapes(draft);
  const weightsFile = safetensorsFileBytes(
    [
      ...params.map(([name, shape]) => ({ name, dtype: 'F32' as const, shape })),
      { name: 't2d', dtype: 'BOOL', shape: [draft.vocabSize] },
      { name: 'd2t', dtype: 'I64', shape: [draft.draftVocabSize] },
    ],
    { format: 'pt', speclab: 'weights' },
  );
  const optimizerFile = safetensorsFileBytes(
    params.flatMap(([name, shape]) => [
      { name: `${name}.m`, dtype: 'F32' as const, shape },
      { name: `${name}.v`, dtype: 'F32' as const, shape },
    ]),
    { format: 'pt', speclab: 'adamw-moments' },
  );
  return { bytes: weightsFile + optimizerFile, weightsFile, optimizerFile };
}

export interface CheckpointCadence {
  /** Steps between two checkpoints, at most (fewer where a round ends sooner). */
  readonly every: number;
  readonly stepsPerRound: number;
  readonly checkpointEvery: number;
}

/** When `speclab train` checkpoints: every `checkpointEvery` steps, at each round's end (a round is ⌈roundPrompts / batchSize⌉ steps), and at the last. */
export function checkpointCadence(s: { checkpointEvery: number; roundPrompts: number; batchSize: number }): CheckpointCadence {
  const stepsPerRound = Math.ceil(s.roundPrompts / s.batchSize);
  return { every: Math.min(s.checkpointEvery, stepsPerRound), stepsPerRound, checkpointEvery: s.checkpointEvery };
}
