// rmsnorm/backward-dw — weight gradient of y = w ⊙ x · r:  dw_j = Σ_rows dy_j · x_j · r_row.
// The second pass of the RMSNorm backward, over column blocks, so the row reduction needs no
// atomics and is deterministic.
//
// Shapes: x at row stride strideX, dy at strideDy (each ≥ hidden); invRms f32 [rows];
//   dw f32 [hidden].
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        x
//   2 storage read        dy
//   3 storage read        invRms
//   4 storage read_write  dw
// Override ACCUMULATE: false writes dw, true adds into it (a norm applied at several TTT steps,
//   gradient accumulation over micro-batches).
// Dispatch: ceil(hidden / WG_X) workgroups of WG_X x WG_Y. Invocation (lx, ly) owns column
//   wg.x * WG_X + lx and rows ly, ly + WG_Y, ...; neighbouring lx read neighbouring addresses.
//   WG_X (columns per workgroup) is RMSNORM_DW_COLUMNS in src/kernels/rmsnorm.ts, appended to
//   this source as a constant; the host's grid uses the same value. WG_Y is internal.
// Numerics: f32 sums in increasing row order per slice; the WG_Y slices are added in fixed order.

struct Params {
  rows: u32,
  hidden: u32,
  strideX: u32,
  strideDy: u32,
}

override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read> invRms: array<f32>;
@group(0) @binding(4) var<storage, read_write> dw: array<f32>;

// Row slices per column; the final sum below is written out for four.
const WG_Y: u32 = 4u;

var<workgroup> partial: array<f32, WG_X * WG_Y>; // partial[ly * WG_X + lx]

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let col = wg.x * WG_X + lid.x;
  var acc = 0.0;
  if (col < p.hidden) {
    for (var r = lid.y; r < p.rows; r += WG_Y) {
      acc = fma(dy[r * p.strideDy + col], x[r * p.strideX + col] * invRms[r], acc);
    }
  }
  partial[lid.y * WG_X + lid.x] = acc;
  workgroupBarrier();
  if (lid.y == 0u && col < p.hidden) {
    var g = ((partial[lid.x] + partial[WG_X + lid.x]) + partial[2u * WG_X + lid.x]) + partial[3u * WG_X + lid.x];
    if (ACCUMULATE) { g += dw[col]; }
    dw[col] = g;
  }
}
