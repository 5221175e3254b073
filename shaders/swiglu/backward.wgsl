// swiglu/backward — gradients of h = silu(gate) ⊙ up:
//   dup   = dh ⊙ silu(gate)
//   dgate = dh ⊙ up ⊙ silu'(gate),  silu'(g) = sigmoid(g) · (1 + g · (1 − sigmoid(g)))
//
// Shapes: f32 [rows, inter] at row strides: gate and dgate use strideGate, up and dup strideUp,
//   dh strideH (each ≥ inter; padding untouched).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        gate
//   2 storage read        up
//   3 storage read        dh
//   4 storage read_write  dgate
//   5 storage read_write  dup
// Dispatch: ceil(rows · inter / WG) workgroups of WG, folded into (x, y); one invocation per
//   element.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/swiglu-math.wgsl (f32; sigmoid saturates to exactly 0 or 1, no NaN).

#include "include/swiglu-common.wgsl"
#include "include/swiglu-math.wgsl"
@group(0) @binding(3) var<storage, read> dh: array<f32>;
@group(0) @binding(4) var<storage, read_write> dgate: array<f32>;
@group(0) @binding(5) var<storage, read_write> dup: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.rows * p.inter) { return; }
  let row = idx / p.inter;
  let col = idx % p.inter;
  let gi = row * p.strideGate + col;
  let ui = row * p.strideUp + col;
  let grads = swigluBackwardAt(gate[gi], up[ui], dh[row * p.strideH + col]);
  dgate[gi] = grads.x;
  dup[ui] = grads.y;
}
