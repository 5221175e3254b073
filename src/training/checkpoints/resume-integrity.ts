/**
 * Checks a resume makes before training on restored state, so damage is refused with its likely
 * cause instead of surfacing later as a misleading error.
 */
import type { MetadataStore } from '../../control/metadata-store.ts';
import type { LocalFeatureStore } from '../../data/local-feature-store.ts';
import type { FileStore } from '../../ports/storage.ts';

/**
 * Every requeued sample must still be on disk: its spill is deleted only after its durable ack, so a
 * missing one means the ledger lost an ack it had made durable (a torn journal tail that was in fact
 * fsynced), or the spill folder was damaged. Training would otherwise fail later with "no spill file".
 */
export async function checkRequeuedSpills(
  runId: string,
  store: LocalFeatureStore,
  storage: { readonly metadata: MetadataStore; readonly spill?: FileStore },
  requeued: readonly string[],
): Promise<void> {
  if (!storage.spill || requeued.length === 0) return;
  const spilled = new Set(await store.spilledSampleIds());
  const missing = requeued.filter((id) => !spilled.has(id));
  if (missing.length === 0) return;
  const shown = `${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ', …' : ''}`;
  const note = storage.metadata.repairNote;
  const cause = note
    ? `the ledger lost an acknowledged record (${note}); the metadata journal is damaged`
    : `the spill folder ${storage.spill.root} was damaged or emptied`;
  throw new Error(
    `resume ${runId}: ${missing.length} committed but unacked sample(s) (${shown}) have no spill file, which is deleted only after a durable ack: ${cause}, so this run is not resumable`,
  );
}
