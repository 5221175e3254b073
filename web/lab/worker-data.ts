/**
 * The lab's training data with progress: the prompts continued greedily by the target a few at a
 * time, so the page shows how many are done and an ETA (one call for all of them reports nothing
 * for minutes on a software adapter). Kept sealed in the checkpoint store, so a reloaded tab
 * continues on exactly the sequences its checkpoints were trained on.
 */
import type { TargetModel } from '../../src/model/target/model.ts';
import type { FileStore } from '../../src/ports/storage.ts';
import type { TrainSequence } from '../../src/contracts/index.ts';
import { continueWithTarget } from '../../src/training/sequences/eagle3-data.ts';
import { openSealedJson, sealJson } from '../../src/util/sealed-json.ts';

/** Prompts per generate() call: small enough for frequent progress, large enough to batch. */
const CHUNK = 4;

export type OnProgress = (done: number, total: number) => void;

/** `prompts` continued by the target (`responseLength` tokens each), reporting after every chunk. */
export async function continueWithProgress(
  target: TargetModel,
  prompts: readonly number[][],
  responseLength: number,
  onProgress: OnProgress,
): Promise<TrainSequence[]> {
  const out: TrainSequence[] = [];
  onProgress(0, prompts.length);
  for (let i = 0; i < prompts.length; i += CHUNK) {
    out.push(...(await continueWithTarget(target, prompts.slice(i, i + CHUNK), responseLength)));
    onProgress(out.length, prompts.length);
  }
  return out;
}

export const LAB_SEQUENCES_FILE = 'lab-sequences.json';

/** The run's training sequences: the saved ones when they were made from these prompts, else made now and saved. */
export async function labTrainSequences(
  files: FileStore,
  target: TargetModel,
  prompts: readonly number[][],
  responseLength: number,
  onProgress: OnProgress,
): Promise<TrainSequence[]> {
  const key = JSON.stringify({ prompts, responseLength, target: target.config });
  if (await files.exists(LAB_SEQUENCES_FILE)) {
    const saved = openSealedJson(
      await files.read(LAB_SEQUENCES_FILE),
      `${files.root}/${LAB_SEQUENCES_FILE}`,
      "the run's training sequences",
    ) as { key?: string; sequences?: TrainSequence[] };
    if (saved.key === key && Array.isArray(saved.sequences)) {
      onProgress(saved.sequences.length, prompts.length);
      return saved.sequences;
    }
  }
  const sequences = await continueWithProgress(target, prompts, responseLength, onProgress);
  await files.writeAtomic(LAB_SEQUENCES_FILE, sealJson({ key, sequences }));
  return sequences;
}
