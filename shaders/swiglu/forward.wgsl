// swiglu/forward — h = silu(gate) ⊙ up, silu(g) = g · sigmoid(g) (the LLaMA MLP gate).
//
// Shapes: gate, up, h: f32 [rows, inter], each at its own row stride (≥ inter; padding untouched).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        gate
//   2 storage read        up
//   3 storage read_write  h
// Dispatch: ceil(rows · inter / WG) workgroups of WG, folded into (x, y); one invocation per
//   element.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/swiglu-math.wgsl (f32; a saturated gate gives the limit, no NaN).

#include "include/swiglu-common.wgsl"
#include "include/swiglu-math.wgsl"
@group(0) @binding(3) var<storage, read_write> h: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.rows * p.inter) { return; }
  let row = idx / p.inter;
  let col = idx % p.inter;
  h[row * p.strideH + col] = swigluForwardAt(gate[row * p.strideGate + col], up[row * p.strideUp + col]);
}
