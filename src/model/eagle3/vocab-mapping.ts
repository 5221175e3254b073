/**
 * Draft-vocabulary mapping (docs/eagle3.md §7): which D of the V target tokens the draft predicts.
 *
 * Rule, step by step:
 *  1. Token counts over loss-masked positions, in first-insertion order (a Python Counter's order).
 *  2. If fewer than D distinct tokens were counted, append zero-count ids taken from 0..D−1 in
 *     ascending order, skipping those already present, until there are D entries.
 *  3. Keep the D most frequent; ties keep insertion order (Counter.most_common is a stable sort).
 *  4. Sort the kept ids ascending → `used`; d2t[i] = used[i] − i (offsets); t2d[v] = v ∈ used.
 *
 * Pure CPU code: the mapping is built once per dataset and uploaded (t2d as i32 0/1, used as i32).
 */

export interface VocabMapping {
  /** Target id of each draft id, ascending: used[i] = i + d2t[i]. */
  readonly used: Int32Array;
  /** Offsets (what SpecForge stores as int64 `d2t`). */
  readonly d2t: Int32Array;
  /** 1 where the target id is in the draft vocabulary, else 0 (SpecForge's bool `t2d`). */
  readonly t2d: Int32Array;
}

/** An insertion-ordered token → count table (a JS Map keeps insertion order, like a Python dict). */
export type TokenCounts = ReadonlyMap<number, number>;

/**
 * Count token ids at positions whose loss mask is non-zero, in the order each id first appears
 * (row-major over the batch). Rejects ids outside [0, vocab) instead of silently dropping them.
 */
export function countLossTokens(inputIds: ArrayLike<number>, lossMask: ArrayLike<number>, vocab: number): Map<number, number> {
  if (inputIds.length !== lossMask.length) {
    throw new Error(`countLossTokens: inputIds has ${inputIds.length} entries but lossMask has ${lossMask.length}`);
  }
  const counts = new Map<number, number>();
  for (let i = 0; i < inputIds.length; i++) {
    if (lossMask[i] === 0) continue;
    const id = inputIds[i];
    if (!Number.isInteger(id) || id < 0 || id >= vocab)
      throw new Error(`countLossTokens: inputIds[${i}] = ${id} is outside the vocabulary [0, ${vocab})`);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/**
 * A dense per-id count array (like the fixture's `vocab.counts`) as an insertion-ordered table in
 * ascending id order, keeping only ids that occurred — what `Counter(zip(unique, counts))` builds.
 */
export function countsFromDense(dense: ArrayLike<number>): Map<number, number> {
  const counts = new Map<number, number>();
  for (let id = 0; id < dense.length; id++) if (dense[id] > 0) counts.set(id, dense[id]);
  return counts;
}

export function buildVocabMapping(counts: TokenCounts, vocab: number, draftVocab: number): VocabMapping {
  if (!Number.isInteger(vocab) || vocab <= 0) throw new Error(`buildVocabMapping: vocab must be a positive integer, got ${vocab}`);
  if (!Number.isInteger(draftVocab) || draftVocab <= 0 || draftVocab > vocab) {
    throw new Error(`buildVocabMapping: draftVocab must be an integer in [1, vocab=${vocab}], got ${draftVocab}`);
  }
  const entries: [number, number][] = [];
  for (const [id, count] of counts) {
    if (!Number.isInteger(id) || id < 0 || id >= vocab)
      throw new Error(`buildVocabMapping: token id ${id} is outside the vocabulary [0, ${vocab})`);
    if (!(count >= 0)) throw new Error(`buildVocabMapping: token ${id} has invalid count ${count}`);
    entries.push([id, count]);
  }
  // Step 2: pad with the lowest unused ids (zero counts), appended after the counted ones.
  const present = new Set(entries.map(([id]) => id));
  for (let id = 0; entries.length < draftVocab && id < draftVocab; id++) {
    if (!present.has(id)) entries.push([id, 0]);
  }
  // Step 3: Array.prototype.sort is stable, so equal counts keep insertion order.
  const top = entries
    .map(([id, count], order) => ({ id, count, order }))
    .sort((a, b) => b.count - a.count || a.order - b.order)
    .slice(0, draftVocab);
  const used = Int32Array.from(top.map((e) => e.id)).sort();
  const d2t = new Int32Array(draftVocab);
  const t2d = new Int32Array(vocab);
  for (let i = 0; i < draftVocab; i++) {
    d2t[i] = used[i] - i;
    t2d[used[i]] = 1;
  }
  return { used, d2t, t2d };
}

/** used = d2t + arange(D): the draft → target id list the GPU teacher gathers with. */
export function usedFromD2t(d2t: ArrayLike<number>, vocab: number): Int32Array {
  const used = new Int32Array(d2t.length);
  for (let i = 0; i < d2t.length; i++) {
    used[i] = i + d2t[i];
    if (used[i] < 0 || used[i] >= vocab) throw new Error(`usedFromD2t: draft id ${i} maps to target id ${used[i]}, outside [0, ${vocab})`);
    if (i > 0 && used[i] <= used[i - 1])
      throw new Error(`usedFromD2t: target ids must be strictly ascending, but draft ${i} maps to ${used[i]} after ${used[i - 1]}`);
  }
  return used;
}
