// include/rmsnorm-forward-row — the row body of rmsnorm/forward in all three layouts
// (rmsnorm/forward, forward-rows, forward-subgroup) and of rmsnorm/gather-forward (the same three):
// y = w ⊙ x / sqrt(mean(x²) + eps), invRms[row] saved, written as processRow for
// include/row-reduce-{wide,tree,subgroup}, which supply LANES, rowSumFinal and main.
// Where x comes from is the including shader's: it declares Params `p` (with rows, hidden, strideY
// and eps) and x's binding, and provides
//   fn xRowBase(row: u32) -> u32        where row `row` of x starts (only called for row < p.rows)
//   fn xAt(base: u32, j: u32) -> f32     element j of the row that starts at base
// (include/rmsnorm-forward-x.wgsl: x at a row stride; include/rmsnorm-gathered-x.wgsl: embedding rows).
// Bindings declared here (group 0): 2 read w, 3 read_write y, 4 read_write invRms.
// Numerics: each lane sums x² over columns lane, lane + LANES, … in increasing order (fma), then
// rowSumFinal; y = w * (x * invRms), the Hugging Face LlamaRMSNorm order.

@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> invRms: array<f32>;

fn rowCount() -> u32 { return p.rows; }

fn processRow(row: u32, lane: u32, slot: u32) {
  let live = row < p.rows;
  let n = select(0u, p.hidden, live); // a row past the end reads and writes nothing
  var xBase = 0u;
  if (live) { xBase = xRowBase(row); }
  var acc = 0.0;
  for (var j = lane; j < n; j += LANES) {
    let v = xAt(xBase, j);
    acc = fma(v, v, acc);
  }
  let r = 1.0 / sqrt(rowSumFinal(acc, lane, slot) / f32(p.hidden) + p.eps);
  if (live && lane == 0u) { invRms[row] = r; }
  let yBase = row * p.strideY;
  for (var j = lane; j < n; j += LANES) {
    y[yBase + j] = w[j] * (xAt(xBase, j) * r);
  }
}
