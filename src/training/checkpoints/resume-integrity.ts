/**
 * Checks a resume makes before training on restored state, so damage is refused with its likely
 * cause instead of surfacing later as a misleading error.
 */
import type { MetadataStore } from '../../control/metadata-store.ts';
import type { LocalFeatureStore } from '../../data/local-feature-store.ts';
import type { FileStore } from '../../ports/storage.ts';
import { latestCheckpoint } from './train-checkpoint.ts';

/**
 * Every requeued sample must still be on disk: its spill is deleted only after its durable ack, so a
 * missing one means the ledger lost an ack it had made durable (a torn journal tail that was in fact
 * fsynced, or a whole ack record gone), or the spill folder was damaged. Training would otherwise
 * fail later with "no spill file". A lost ack is told apart by what it leaves: the checkpoint saved
 * for it, ahead of the ledger's step, or the other requeued samples' spills still in place.
 */
export async function checkRequeuedSpills(
  runId: string,
  store: LocalFeatureStore,
  storage: { readonly metadata: MetadataStore; readonly spill?: FileStore; readonly checkpoints: FileStore },
  requeued: readonly string[],
): Promise<void> {
  if (!storage.spill || requeued.length === 0) return;
  const spilled = new Set(await store.spilledSampleIds());
  const missing = requeued.filter((id) => !spilled.has(id));
  if (missing.length === 0) return;
  const shown = `${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ', …' : ''}`;
  const note = storage.metadata.repairNote;
  if (note)
    throw new Error(
      `resume ${runId}: ${missing.length} committed but unacked sample(s) (${shown}) have no spill file, which is deleted only after a durable ack: the ledger lost an acknowledged record (${note}); the metadata journal is damaged, so this run is not resumable`,
    );
  const journal = storage.metadata.source ?? 'the ledger';
  const step = (await storage.metadata.durableMarker()).globalStep ?? 0;
  const newest = await latestCheckpoint(storage.checkpoints, runId);
  const ahead = newest !== undefined && newest.step > step ? newest : undefined;
  if (ahead || missing.length < requeued.length) {
    const saved = ahead
      ? `; checkpoint ${storage.checkpoints.root}/${ahead.dir} was saved for it, after the journal's last acked step ${step}`
      : '';
    throw new Error(
      `resume ${runId}: the journal ${journal} lost a durable ack: sample ${missing[0]}${missing.length > 1 ? ` (and ${missing.length - 1} more)` : ''} has no spill file, which is deleted only after its ack is durable, yet the journal does not ack it${saved}; so this run is not resumable`,
    );
  }
  throw new Error(
    `resume ${runId}: ${missing.length} committed but unacked sample(s) (${shown}) have no spill file, which is deleted only after a durable ack: the spill folder ${storage.spill.root} was damaged or emptied, or the journal ${journal} lost an ack, so this run is not resumable`,
  );
}
