// include/rmsnorm-backward-dx-row — the row body of rmsnorm/backward-dx in all three layouts
// (rmsnorm/backward-dx, backward-dx-rows, backward-dx-subgroup): the contract, Params, bindings and
// ACCUMULATE override of rmsnorm/backward-dx
//   dx = r · (dy ⊙ w) − x · (r³ / hidden) · Σ_j dy_j w_j x_j       (per row)
// written as processRow for include/row-reduce-{wide,tree,subgroup}, which supply LANES, rowSumFinal and
// main.
// Numerics: each lane accumulates dy·w·x over columns lane, lane + LANES, … (fma, increasing
// columns), then rowSumFinal.

struct Params {
  rows: u32,
  hidden: u32,
  strideX: u32,
  strideDy: u32,
  strideDx: u32,
}

override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read> invRms: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;

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
