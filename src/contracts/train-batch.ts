/**
 * `TrainBatch` (docs/contracts.md §9): the only record allowed to hold tensors, and only on the
 * trainer / data-plane side. It is mutable (the loader fills it, the strategy reads it) and
 * generic over the tensor type, because GPU tensors (src/gpu/tensor.ts `Tensor`) live outside
 * the contracts and CPU tests collate into typed arrays.
 */
import { DraftStrategyName, TargetRepr } from './enums.ts';
import type { SampleRef } from './records.ts';

export interface TrainBatchMetadata {
  /** Filled by the loader from the first ref; a batch mixing representations is rejected there. */
  targetRepr?: TargetRepr;
  tttLength?: number;
  schemaVersion?: number;
  /** Each sample's real length in tokens (the loader right-pads the batch to the longest). */
  lengths?: number[];
  [key: string]: unknown;
}

export interface TrainBatch<T> {
  sampleIds: string[];
  strategy: DraftStrategyName;
  tensors: Record<string, T>;
  metadata: TrainBatchMetadata;
  /**
   * The metadata refs the batch was collated from, in `sampleIds` order: an online run acks exactly
   * these once the optimizer consumed them. Empty for a batch built by hand, which has no refs to ack.
   */
  readonly refs: readonly SampleRef[];
}

/** Builds a batch, checking what does not depend on the tensor type. */
export function makeTrainBatch<T>(init: {
  sampleIds: readonly string[];
  strategy: DraftStrategyName;
  tensors: Record<string, T>;
  metadata?: TrainBatchMetadata;
  refs?: readonly SampleRef[];
}): TrainBatch<T> {
  const strategy = DraftStrategyName.safeParse(init.strategy);
  if (!strategy.success) {
    throw new TypeError(`TrainBatch.strategy: unknown draft strategy ${JSON.stringify(init.strategy)}`);
  }
  if (init.sampleIds.length === 0) throw new TypeError('TrainBatch.sampleIds: a batch needs at least one sample');
  const seen = new Set<string>();
  for (const id of init.sampleIds) {
    if (typeof id !== 'string' || id.length === 0) throw new TypeError(`TrainBatch.sampleIds: invalid id ${JSON.stringify(id)}`);
    if (seen.has(id)) throw new TypeError(`TrainBatch.sampleIds: sample ${id} appears twice`);
    seen.add(id);
  }
  const refs = init.refs ?? [];
  if (refs.length > 0 && (refs.length !== init.sampleIds.length || refs.some((r, i) => r.sampleId !== init.sampleIds[i]))) {
    throw new TypeError(`TrainBatch.refs: refs [${refs.map((r) => r.sampleId)}] do not match sampleIds [${init.sampleIds}]`);
  }
  const repr = init.metadata?.targetRepr;
  if (repr !== undefined && !TargetRepr.safeParse(repr).success) {
    throw new TypeError(`TrainBatch.metadata.targetRepr: unknown target representation ${JSON.stringify(repr)}`);
  }
  return {
    sampleIds: [...init.sampleIds],
    strategy: strategy.data,
    tensors: { ...init.tensors },
    metadata: { ...init.metadata },
    refs: [...refs],
  };
}
