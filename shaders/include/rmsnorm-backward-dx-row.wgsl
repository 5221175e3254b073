// include/rmsnorm-backward-dx-row — the row body of rmsnorm/backward-dx in all three layouts
// (rmsnorm/backward-dx, backward-dx-rows, backward-dx-subgroup, and the dx rows of
// rmsnorm/backward-subgroup-fused and rmsnorm/pair-backward-subgroup)
//   dx = r · (dy ⊙ w) − x · (r³ / hidden) · Σ_j dy_j w_j x_j       (per row)
// written as processRow for include/row-reduce-{wide,tree,subgroup}, which supply LANES, rowSumFinal and
// main. The including shader declares Params `p` (with rows, hidden, strideX, strideDy and strideDx),
// the bindings x, w, dy, invRms and dx and the override ACCUMULATE: include/rmsnorm-backward-dx-params
// has rmsnorm/backward-dx's.
// Numerics: each lane accumulates dy·w·x over columns lane, lane + LANES, … (fma, increasing
// columns), then rowSumFinal.

fn rowCount() -> u32 { return p.rows; }

fn processRow(row: u32, lane: u32, slot: u32) {
  let live = row < p.rows;
  let n = select(0u, p.hidden, live); // a row past the end reads and writes nothing
  let xBase = row * p.strideX;
  let dyBase = row * p.strideDy;
  var acc = 0.0;
  for (var j = lane; j < n; j += LANES) {
    acc = fma(dy[dyBase + j] * w[j], x[xBase + j], acc);
  }
  let dot = rowSumFinal(acc, lane, slot);
  if (!live) { return; }
  let r = invRms[row];
  let c = r * r * r * dot / f32(p.hidden);
  let dxBase = row * p.strideDx;
  for (var j = lane; j < n; j += LANES) {
    var g = r * (dy[dyBase + j] * w[j]) - x[xBase + j] * c;
    if (ACCUMULATE) { g += dx[dxBase + j]; }
    dx[dxBase + j] = g;
  }
}
