/**
 * What the controller asks its MetadataStore about committed samples: the fresh flag of each ref
 * of a batch commit, and the committed refs of ids an ack or a fail names. An id never committed is
 * refused as a whole batch (UnknownSampleError), before anything is recorded or released, because
 * a durable marker naming a sample no restart can account for could never be reconciled
 * (docs/durability.md §2). Kept apart from the controller so its endpoints read as the order of
 * their steps, and this refusal is written once for both ack and fail.
 */
import type { SampleRef } from '../contracts/records.ts';
import type { MetadataStore } from './metadata-store.ts';

/** An ack or fail named a sample id this controller's metadata store never committed. */
export class UnknownSampleError extends Error {
  override name = 'UnknownSampleError';
}

/** One store transaction for the batch; fresh flag per ref. */
export async function commitFlags(store: MetadataStore, refs: SampleRef[], where: string): Promise<boolean[]> {
  const flags = await store.commitSamples(refs);
  if (flags.length !== refs.length) throw new Error(`${where}: metadata store returned ${flags.length} flags for ${refs.length} refs`);
  return flags;
}

/** The committed refs of `sampleIds`; throws UnknownSampleError naming every id never committed in run `runId`. */
export async function resolveCommitted(
  store: MetadataStore,
  runId: string,
  sampleIds: readonly string[],
  where: string,
  consequence: string,
): Promise<SampleRef[]> {
  const refs: SampleRef[] = [];
  const unknown: string[] = [];
  const found = await store.getCommittedMany(sampleIds);
  for (const [i, id] of sampleIds.entries()) {
    const ref = found[i];
    if (ref !== undefined) refs.push(ref);
    else unknown.push(id);
  }
  if (unknown.length > 0) {
    const shown = unknown
      .slice(0, 8)
      .map((id) => JSON.stringify(id))
      .join(', ');
    throw new UnknownSampleError(
      `${where}: ${unknown.length} sample id(s) were never committed in run ${runId}: ${shown}${unknown.length > 8 ? ', ...' : ''}; ${consequence}`,
    );
  }
  return refs;
}
