// include/hard-ce-row — the row body of loss/hard-ce in all three layouts (loss/hard-ce,
// loss/hard-ce-rows, loss/hard-ce-subgroup): the contract, Params, bindings and GRAD_MODE /
// USE_COUNT overrides of loss/hard-ce (hard-label cross-entropy, its gradient, NaN loss for a
// label ≥ V), written as processRow for include/row-reduce-{wide,tree,subgroup} (LANES, main) with
// include/loss-stats-{wide,lanes} (rowSoftmax, rowPick, LOWEST).
// Numerics: online (max, Σexp) per lane over columns lane, lane + LANES, …, combined by rowSoftmax.
// x[y] is read by the one lane that owns column y, before that same lane may overwrite it in place
// (program order; no cross-lane ordering needed), and reaches every lane through rowPick.

struct Params {
  count: u32,
  rowStart: u32,
  V: u32,
  xPart: u32,
  labPart: u32,
  gPart: u32,
  lPart: u32,
  cntIndex: u32,
  gradScale: f32,
  invDen: f32,
}

override GRAD_MODE: u32 = 0u;
override USE_COUNT: bool = false;

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read> LAB: array<i32>;
@group(0) @binding(3) var<storage, read_write> G: array<f32>;
@group(0) @binding(4) var<storage, read_write> L: array<f32>;
@group(0) @binding(5) var<storage, read> CNT: array<f32>;

fn rowCount() -> u32 { return u.count; }

fn processRow(i: u32, lane: u32, slot: u32) {
  let live = i < u.count;
  let r = u.rowStart + i;
  var y = -1;
  if (live) { y = LAB[r - u.labPart]; }
  let valid = y >= 0 && u32(y) < u.V;
  let n = select(0u, u.V, valid);
  let xBase = (r - u.xPart) * u.V;
  var invDen = u.invDen;
  if (USE_COUNT) { invDen = 1.0 / max(CNT[u.cntIndex], 1.0); }

  var m = LOWEST;
  var s = 0.0;
  for (var v = lane; v < n; v += LANES) {
    let x = X[xBase + v];
    if (x > m) {
      s = s * exp(m - x) + 1.0;
      m = x;
    } else {
      s += exp(x - m);
    }
  }
  let stats = rowSoftmax(m, s, lane, slot);
  let lse = stats.x + log(stats.y);
  let ownsY = valid && u32(y) % LANES == lane;
  var xyLane = 0.0;
  if (ownsY) { xyLane = X[xBase + u32(y)]; }

  let g = u.gradScale * invDen;
  let width = select(0u, u.V, live);
  if (GRAD_MODE != 0u) {
    for (var v = lane; v < width; v += LANES) {
      var grad = 0.0;
      if (valid) {
        grad = g * (exp(X[xBase + v] - lse) - select(0.0, 1.0, v == u32(y)));
      }
      if (GRAD_MODE == 1u) { X[xBase + v] = grad; }
      if (GRAD_MODE == 2u) { G[(r - u.gPart) * u.V + v] = grad; }
    }
  }
  let xy = rowPick(xyLane, ownsY, lane, slot);
  if (live && lane == 0u) {
    var loss = 0.0;
    if (valid) { loss = (lse - xy) * invDen; }
    if (y >= 0 && !valid) {
      // A quiet-NaN bit pattern built from a runtime value (a constant NaN is a shader-creation error).
      loss = bitcast<f32>(0x7fc00000u + (u.count - u.count));
    }
    L[r - u.lPart] = loss;
  }
}
