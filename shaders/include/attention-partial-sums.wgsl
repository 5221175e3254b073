// include/attention-partial-sums — sumP / sumDP: the TPR per-invocation partial dot products of
// one (row, key) pair, always summed in this order, so every invocation of a row gets the same
// bits. Uses the workgroup arrays Ps and DPs that the including kernel declares. Included by
// attention/{dq,dkv}; attention/forward has the same sumP for its Ps alone.

// A fixed pairwise tree for each supported TPR (from the kernel module's geometry record). TPR is
// a constant, so only one branch survives compilation; TPR 4 is the order of the `flash` geometry.
const_assert TPR == 1u || TPR == 2u || TPR == 4u || TPR == 8u;

fn sumP(i: u32) -> f32 {
  if (TPR == 1u) { return Ps[i]; }
  if (TPR == 2u) { return Ps[i] + Ps[i + 1u]; }
  if (TPR == 4u) { return (Ps[i] + Ps[i + 1u]) + (Ps[i + 2u] + Ps[i + 3u]); }
  return ((Ps[i] + Ps[i + 1u]) + (Ps[i + 2u] + Ps[i + 3u])) + ((Ps[i + 4u] + Ps[i + 5u]) + (Ps[i + 6u] + Ps[i + 7u]));
}

fn sumDP(i: u32) -> f32 {
  if (TPR == 1u) { return DPs[i]; }
  if (TPR == 2u) { return DPs[i] + DPs[i + 1u]; }
  if (TPR == 4u) { return (DPs[i] + DPs[i + 1u]) + (DPs[i + 2u] + DPs[i + 3u]); }
  return ((DPs[i] + DPs[i + 1u]) + (DPs[i + 2u] + DPs[i + 3u])) + ((DPs[i + 4u] + DPs[i + 5u]) + (DPs[i + 6u] + DPs[i + 7u]));
}
