// loss/reduce — deterministic column sums of a small row-major table, for losses and metrics
// (no float atomics: one workgroup, a fixed summation order, identical results every run).
//
//   out[outOffset + c] = (ACCUMULATE ? out[outOffset + c] : 0) + scale · Σ_{r < rows} in(r, c)
// for c < cols, where in(r, c) = IN[r · cols + c] read as f32 (MODE 0), or, in MODE 1, 1.0 when
// IN[r · cols + c] read as i32 is ≥ 0 (counts non-ignored labels), else 0.
// Bindings (group 0):
//   0 uniform Params
//   1 read       IN  u32 [rows · cols]  (bit patterns, reinterpreted per MODE)
//   2 read_write OUT f32 [*]
// override MODE: u32 (0 sum floats, 1 count non-negative ints); override ACCUMULATE: bool.
// Dispatch: (1, 1, 1), 256 invocations. Invocation j sums rows j, j + 256, … in order, then a
// fixed tree combines the 256 partials. f32 accumulation.

struct Params {
  rows: u32,
  cols: u32,
  outOffset: u32,
  scale: f32,
}

override MODE: u32 = 0u;
override ACCUMULATE: bool = false;

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
  for (var c = 0u; c < u.cols; c++) {
    var s = 0.0;
    for (var r = lid; r < u.rows; r += WG) { s += value(r * u.cols + c); }
    red[lid] = s;
    workgroupBarrier();
    for (var step = WG / 2u; step > 0u; step = step >> 1u) {
      if (lid < step) { red[lid] = red[lid] + red[lid + step]; }
      workgroupBarrier();
    }
    if (lid == 0u) {
      var base = 0.0;
      if (ACCUMULATE) { base = OUT[u.outOffset + c]; }
      OUT[u.outOffset + c] = base + u.scale * red[0];
    }
    workgroupBarrier();
  }
}
