// rmsnorm/forward — y = w ⊙ x / sqrt(mean(x²) + eps) per row, saving 1/rms for the backward.
//
// Shapes: x f32 rows of `hidden` at row stride strideX (≥ hidden; padded rows allowed);
//   w f32 [hidden]; y f32 at row stride strideY (padding between rows is left untouched);
//   invRms f32 [rows] = 1 / sqrt(mean(x²) + eps).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        x
//   2 storage read        w
//   3 storage read_write  y
//   4 storage read_write  invRms
// Dispatch: one workgroup of 256 per row, rows folded into (x, y) (row = wg.y * nwg.x + wg.x).
// Numerics: statistics in f32: each invocation sums x² over columns lid, lid + 256, ... in
//   increasing order, then a fixed-shape tree reduction in workgroup memory (deterministic).
//   y = w * (x * invRms), the Hugging Face LlamaRMSNorm order.

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

#include "include/tree-sum-256.wgsl"

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = wg.y * nwg.x + wg.x;
  if (row >= p.rows) { return; }
  let xBase = row * p.strideX;
  var acc = 0.0;
  for (var j = lid.x; j < p.hidden; j += WG) {
    let v = x[xBase + j];
    acc = fma(v, v, acc);
  }
  partial[lid.x] = acc;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half = half / 2u) {
    if (lid.x < half) { partial[lid.x] = partial[lid.x] + partial[lid.x + half]; }
    workgroupBarrier();
  }
  let r = 1.0 / sqrt(partial[0] / f32(p.hidden) + p.eps);
  if (lid.x == 0u) { invRms[row] = r; }
  let yBase = row * p.strideY;
  for (var j = lid.x; j < p.hidden; j += WG) {
    y[yBase + j] = w[j] * (x[xBase + j] * r);
  }
}
