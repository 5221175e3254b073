// include/row-reduce-subgroup-sums — the reductions of include/row-reduce-subgroup (rowSum,
// rowSumFinal, rowMax, rowMinU32) and its workgroup's row loop (processRowGroup) without its entry
// point, for a kernel that runs row work in some of its workgroups and other work in the rest
// (rmsnorm/backward-subgroup-fused, rmsnorm/pair-backward-subgroup). The contract, the constants
// LANES and ROWS and the numerics are include/row-reduce-subgroup's.

const_assert LANES >= 1u && (LANES & (LANES - 1u)) == 0u && ROWS >= 1u && LANES <= 128u;

fn rowSum(v: f32, lane: u32, slot: u32) -> f32 {
  var s = v;
  for (var half = LANES / 2u; half > 0u; half = half >> 1u) { s = s + subgroupShuffleXor(s, half); }
  return s;
}

// No barrier to skip in this layout: the last reduction is a plain rowSum.
fn rowSumFinal(v: f32, lane: u32, slot: u32) -> f32 {
  return rowSum(v, lane, slot);
}

fn rowMax(v: f32, lane: u32, slot: u32) -> f32 {
  return subgroupMax(v);
}

fn rowMinU32(v: u32, lane: u32, slot: u32) -> u32 {
  return subgroupMin(v);
}

// Segment rows group · ROWS + j, j < ROWS, through the including shader's processRow, stopping at the
// first past rowCount(): one workgroup's rows.
fn processRowGroup(group: u32, lane: u32) {
  let first = group * ROWS;
  for (var j = 0u; j < ROWS; j++) {
    if (first + j >= rowCount()) { break; }
    processRow(first + j, lane, 0u);
  }
}
