// loss/reduce — deterministic column sums of a small table, for losses and metrics (no float
// atomics: one workgroup, a fixed summation order, identical results every run).
//
//   S_g,c = Σ_{r < rows} in(inOffset + g · groupInStride + c · colStride + r · rowStride)
//   out[outOffset + g · groupOutStride + c] = (ACCUMULATE ? that : 0) + scale · S_g,c    for g < groups, c < cols
//   TOTAL (groups = 1): out[totalOffset] = (ACCUMULATE_TOTAL ? out[totalOffset] : 0) + Σ_c weights[c] · S_0,c,
//          added in column order (c = 0 first)
// where in(i) = IN[i] read as f32 (MODE 0), or, in MODE 1, 1.0 when IN[i] read as i32 is ≥ 0
// (counts non-ignored labels), else 0. A row-major [rows, cols] table has rowStride = cols,
// colStride = 1; the EAGLE3 training step's row losses lie as [steps, stride] (a step's rows
// contiguous), rowStride = 1, colStride = stride, and the TOTAL term is the steps' weighted loss. Groups
// are tables of the same shape at a fixed distance: the training step's per-step metric terms, one
// [rows, 4] table per TTT step at groupInStride, summed into slot g (groupOutStride = 4).
// Bindings (group 0):
//   0 uniform Params (weights: up to MAX_WEIGHTS = 48 columns a dispatch when TOTAL)
//   1 read       IN  u32 [*]  (bit patterns, reinterpreted per MODE)
//   2 read_write OUT f32 [*]
// override MODE: u32 (0 sum floats, 1 count non-negative ints); override ACCUMULATE, TOTAL,
// ACCUMULATE_TOTAL: bool.
// Dispatch: (1, 1, 1), 256 invocations. For each group in turn, each column in turn, invocation j sums
// rows j, j + 256, … in order, then a fixed tree combines the 256 partials (so a group has the bits of
// a dispatch of its own). f32 accumulation; out[outOffset + c] and the total are each
// one f32 multiply and add per column, so a total over several dispatches (ACCUMULATE_TOTAL) has the
// bits of one dispatch over all the columns.

struct Params {
  rows: u32,
  cols: u32,
  outOffset: u32,
  scale: f32,
  rowStride: u32,
  colStride: u32,
  totalOffset: u32,
  inOffset: u32,
  groups: u32,
  groupInStride: u32,
  groupOutStride: u32,
  weights: array<vec4<f32>, 12>,
}

override MODE: u32 = 0u;
override ACCUMULATE: bool = false;
override TOTAL: bool = false;
override ACCUMULATE_TOTAL: bool = false;

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read> IN: array<u32>;
@group(0) @binding(2) var<storage, read_write> OUT: array<f32>;

const WG: u32 = 256u;

var<workgroup> red: array<f32, 256>;

fn value(i: u32) -> f32 {
  if (MODE == 1u) { return select(0.0, 1.0, bitcast<i32>(IN[i]) >= 0); }
  return bitcast<f32>(IN[i]);
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(local_invocation_index) lid: u32) {
  var total = 0.0;
  if (TOTAL && ACCUMULATE_TOTAL && lid == 0u) { total = OUT[u.totalOffset]; }
  for (var g = 0u; g < u.groups; g++) {
    let inBase = u.inOffset + g * u.groupInStride;
    let outBase = u.outOffset + g * u.groupOutStride;
    for (var c = 0u; c < u.cols; c++) {
      var s = 0.0;
      for (var r = lid; r < u.rows; r += WG) { s += value(inBase + c * u.colStride + r * u.rowStride); }
      red[lid] = s;
      workgroupBarrier();
      for (var step = WG / 2u; step > 0u; step = step >> 1u) {
        if (lid < step) { red[lid] = red[lid] + red[lid + step]; }
        workgroupBarrier();
      }
      if (lid == 0u) {
        var base = 0.0;
        if (ACCUMULATE) { base = OUT[outBase + c]; }
        OUT[outBase + c] = base + u.scale * red[0];
        if (TOTAL) { total = total + u.weights[c / 4u][c % 4u] * red[0]; }
      }
      workgroupBarrier();
    }
  }
  if (TOTAL && lid == 0u) { OUT[u.totalOffset] = total; }
}
