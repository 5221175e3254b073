// include/rmsnorm-forward-row — the row body of rmsnorm/forward in all three layouts
// (rmsnorm/forward, forward-rows, forward-subgroup): the contract, Params and bindings of
// rmsnorm/forward (y = w ⊙ x / sqrt(mean(x²) + eps), invRms[row] saved), written as processRow
// for include/row-reduce-{wide,tree,subgroup}, which supply LANES, rowSumFinal and main.
// Numerics: each lane sums x² over columns lane, lane + LANES, … in increasing order (fma), then
// rowSumFinal; y = w * (x * invRms), the Hugging Face LlamaRMSNorm order.

struct Params {
  rows: u32,
  hidden: u32,
  strideX: u32,
  strideY: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> invRms: array<f32>;

fn rowCount() -> u32 { return p.rows; }

fn processRow(row: u32, lane: u32, slot: u32) {
  let live = row < p.rows;
  let n = select(0u, p.hidden, live); // a row past the end reads and writes nothing
  let xBase = row * p.strideX;
  var acc = 0.0;
  for (var j = lane; j < n; j += LANES) {
    let v = x[xBase + j];
    acc = fma(v, v, acc);
  }
  let r = 1.0 / sqrt(rowSumFinal(acc, lane, slot) / f32(p.hidden) + p.eps);
  if (live && lane == 0u) { invRms[row] = r; }
  let yBase = row * p.strideY;
  for (var j = lane; j < n; j += LANES) {
    y[yBase + j] = w[j] * (x[xBase + j] * r);
  }
}
