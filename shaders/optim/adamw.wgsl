// optim/adamw — one fused AdamW step on f32 master weights (PyTorch AdamW, foreach=False), one
// element per invocation. The arithmetic is include/adamw-update.wgsl; with USE_CLIP the gradient is
// first scaled by the clip coefficient from the GPU (coef[1]; coef[1] < 0 is optim/finalize's skip
// sentinel for a non-finite gradient norm: nothing is written). The host computes the scalars
// (decay, stepSize, bc2Sqrt) in float64, as PyTorch does in Python. optim/adamw-vec4 is the same
// update four elements at a time, for element counts that are multiples of 4.
//
// Shapes: grad, param, m, v: f32 [n] (one tensor or one row part); clip f32 [≥ 2] (result of
//   optim/finalize; with USE_CLIP = false the host binds grad there and it is not read).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        grad
//   2 storage read        clip
//   3 storage read_write  param
//   4 storage read_write  m
//   5 storage read_write  v
// Dispatch: ceil(n / WG) workgroups of WG, folded into (x, y); one invocation per element.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/adamw-update.wgsl (f32, in its operation order).

#include "include/adamw-update.wgsl"

override USE_CLIP: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read> clip: array<f32>;
@group(0) @binding(3) var<storage, read_write> param: array<f32>;
@group(0) @binding(4) var<storage, read_write> m: array<f32>;
@group(0) @binding(5) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (i >= p.n) { return; }
  if (USE_CLIP && clip[1] < 0.0) { return; }
  let coef = select(1.0, clip[1], USE_CLIP);
  let next = adamwUpdate(p, grad[i] * coef, param[i], m[i], v[i]);
  param[i] = next.x;
  m[i] = next.y;
  v[i] = next.z;
}
