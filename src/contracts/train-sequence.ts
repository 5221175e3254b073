/**
 * The unit of EAGLE3 training data, and how the target writes one: the contract between the code that
 * makes sequences (chat datasets, regeneration, the lab worker's prompts) and the code that trains and
 * evaluates on them (src/training/sequences/eagle3-data.ts re-exports it for the training side).
 */

/** A training sequence: token ids, and 1 on the tokens the draft learns to predict (a reply), 0 elsewhere. */
export interface TrainSequence {
  inputIds: number[];
  lossMask: number[];
}

/** How the target continues prompts: greedy (temperature 0, the default) or sampled; stopping at an end-of-turn id. */
export interface Continuation {
  readonly temperature?: number;
  readonly seed?: number;
  readonly eosTokenIds?: readonly number[];
}
