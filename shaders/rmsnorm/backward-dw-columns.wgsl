// rmsnorm/backward-dw-columns — rmsnorm/backward-dw (dw_j = Σ_rows dy_j · x_j · r_row, the
// weight gradient of y = w ⊙ x · r) for the sized row layouts (src/kernels/row-variant.ts): one
// invocation per column summing every row itself, so there is no workgroup memory and no barrier,
// and narrow rows still spread over ceil(hidden / WG_X) workgroups.
//
// Shapes: x at row stride strideX, dy at strideDy (each ≥ hidden); invRms f32 [rows];
//   dw f32 [hidden].
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        x
//   2 storage read        dy
//   3 storage read        invRms
//   4 storage read_write  dw
// Override ACCUMULATE: false writes dw, true adds into it.
// Dispatch: ceil(hidden / WG_X) workgroups of WG_X; invocation lx owns column wg.x · WG_X + lx
//   (neighbouring lanes read neighbouring addresses). WG_X is RMSNORM_DW_COLUMNS_LANES in
//   src/kernels/rmsnorm.ts, appended as a constant; the host's grid uses the same value.
// Numerics: include/rmsnorm-dw-column.wgsl (f32 fma in increasing row order; deterministic).

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

// x at its row stride (rmsnorm-dw-column reads x through this).
fn dwX(r: u32, col: u32, second: bool) -> f32 { return x[r * p.strideX + col]; }

#include "include/rmsnorm-dw-columns-main.wgsl"
