// include/rmsnorm-norm-row — the row body of every RMSNorm forward kernel (include/rmsnorm-forward-row
// for one norm, include/rmsnorm-pair-forward for two in one dispatch): y = w ⊙ x / sqrt(mean(x²) + eps)
// for row `row` of a norm, 1/rms saved, in any layout of include/row-reduce-{wide,tree,subgroup}
// (which supply LANES and rowSumFinal). `second` says which of a pair's two norms the row is of; a
// kernel passes it as a constant where it can (the one-norm kernels, the pair's wide and subgroup
// layouts), so after inlining each call is specialised to one norm's accessors. The including shader
// provides Params `p` (with hidden and eps), the y binding (array<f32>, read_write) and
//   fn normRows() -> u32                                 each norm's rows; a row at or past it reads and writes nothing
//   fn normXBase(row: u32, second: bool) -> u32          where row `row` of x starts (only called for row < normRows())
//   fn normX(base: u32, j: u32, second: bool) -> f32     element j of the row that starts at base
//   fn normW(j: u32, second: bool) -> f32                the weight of column j
//   fn normYIndex(row: u32, j: u32, second: bool) -> u32 where y's element (row, j) goes
//   fn normStoreInvRms(row: u32, r: f32, second: bool)   saves the row's 1/rms
// Every lane calls rowSumFinal once per row, live or not (the tree and wide layouts hold barriers).
// Numerics: each lane sums x² over columns lane, lane + LANES, … in increasing order (fma), then
// rowSumFinal; y = w * (x * invRms), the Hugging Face LlamaRMSNorm order.

fn normRow(row: u32, lane: u32, slot: u32, second: bool) {
  let live = row < normRows();
  let n = select(0u, p.hidden, live); // a row past the end reads and writes nothing
  var xBase = 0u;
  if (live) { xBase = normXBase(row, second); }
  var acc = 0.0;
  for (var j = lane; j < n; j += LANES) {
    let v = normX(xBase, j, second);
    acc = fma(v, v, acc);
  }
  let r = 1.0 / sqrt(rowSumFinal(acc, lane, slot) / f32(p.hidden) + p.eps);
  if (live && lane == 0u) { normStoreInvRms(row, r, second); }
  for (var j = lane; j < n; j += LANES) {
    y[normYIndex(row, j, second)] = normW(j, second) * (normX(xBase, j, second) * r);
  }
}
