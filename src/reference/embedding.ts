/**
 * Float64 reference for the embedding lookup and its backward (same conventions as
 * src/kernels/embedding.ts: ids outside [0, vocab) read a zero row and receive no gradient).
 */
export interface RefEmbeddingArgs {
  vocab: number;
  hidden: number;
}

function inVocab(id: number, vocab: number): boolean {
  return Number.isInteger(id) && id >= 0 && id < vocab;
}

/** out[n, :] = table[ids[n], :]. */
export function embeddingForwardRef(table: ArrayLike<number>, ids: ArrayLike<number>, args: RefEmbeddingArgs): Float64Array {
  const { vocab, hidden } = args;
  const out = new Float64Array(ids.length * hidden);
  for (let n = 0; n < ids.length; n++) {
    if (!inVocab(ids[n], vocab)) continue;
    for (let h = 0; h < hidden; h++) out[n * hidden + h] = table[ids[n] * hidden + h];
  }
  return out;
}

/** dTable[v, :] = sum of dOut[n, :] over positions n with ids[n] = v. */
export function embeddingBackwardRef(ids: ArrayLike<number>, dOut: ArrayLike<number>, args: RefEmbeddingArgs): Float64Array {
  const { vocab, hidden } = args;
  const dTable = new Float64Array(vocab * hidden);
  for (let n = 0; n < ids.length; n++) {
    if (!inVocab(ids[n], vocab)) continue;
    for (let h = 0; h < hidden; h++) dTable[ids[n] * hidden + h] += dOut[n * hidden + h];
  }
  return dTable;
}
