// include/attention-partial-sums — sumP / sumDP: the TPR per-invocation partial dot products of
// one (row, key) pair, always summed in this order, so every invocation of a row gets the same
// bits. Uses the workgroup arrays Ps and DPs that the including kernel declares. Included by
// attention/{dq,dkv}.

// The fixed pairwise order below is written for four partials (TPR from FLASH_GEOMETRY).
const_assert TPR == 4u;

fn sumP(i: u32) -> f32 {
  return (Ps[i] + Ps[i + 1u]) + (Ps[i + 2u] + Ps[i + 3u]);
}

fn sumDP(i: u32) -> f32 {
  return (DPs[i] + DPs[i + 1u]) + (DPs[i + 2u] + DPs[i + 3u]);
}
