// rmsnorm/backward_dx — input gradient of y = w ⊙ x · r, r = 1 / sqrt(mean(x²) + eps):
//   dx = r · (dy ⊙ w) − x · (r³ / hidden) · Σ_j dy_j w_j x_j       (per row)
//
// Shapes: x at row stride strideX, dy at strideDy, dx at strideDx (each ≥ hidden); w f32 [hidden];
//   invRms f32 [rows] as saved by rmsnorm/forward.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        x
//   2 storage read        w
//   3 storage read        dy
//   4 storage read        invRms
//   5 storage read_write  dx
// Override ACCUMULATE: false writes dx, true adds into it (residual-branch gradients).
// Dispatch: one workgroup of 256 per row, folded into (x, y) like rmsnorm/forward.
// Numerics: the row dot product is accumulated in f32 per invocation (increasing columns) and
//   reduced by a fixed tree (deterministic).

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

#include "include/tree-sum-256.wgsl"

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = wg.y * nwg.x + wg.x;
  if (row >= p.rows) { return; }
  let xBase = row * p.strideX;
  let dyBase = row * p.strideDy;
  var acc = 0.0;
  for (var j = lid.x; j < p.hidden; j += WG) {
    acc = fma(dy[dyBase + j] * w[j], x[xBase + j], acc);
  }
  partial[lid.x] = acc;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half = half / 2u) {
    if (lid.x < half) { partial[lid.x] = partial[lid.x] + partial[lid.x + half]; }
    workgroupBarrier();
  }
  let r = invRms[row];
  let c = r * r * r * partial[0] / f32(p.hidden);
  let dxBase = row * p.strideDx;
  for (var j = lid.x; j < p.hidden; j += WG) {
    var g = r * (dy[dyBase + j] * w[j]) - x[xBase + j] * c;
    if (ACCUMULATE) { g += dx[dxBase + j]; }
    dx[dxBase + j] = g;
  }
}
