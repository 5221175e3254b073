// swiglu/forward-packed — h = silu(gate) ⊙ up with gate and up packed in one row: the output of one
// matmul against the stacked [W_gate; W_up] (the EAGLE3 draft's MLP, model/eagle3/mlp-chunks.ts).
//
// Shapes: gu f32 [rows, 2 · inter]: row r holds gate[r, 0..inter) then up[r, 0..inter);
//   h f32 [rows, inter] (dense).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        gu
//   2 storage read_write  h
// Dispatch: ceil(rows · inter / WG) workgroups of WG, folded into (x, y); one invocation per
//   element of h.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/swiglu-math.wgsl, the same bits as swiglu/forward on the unpacked operands.

#include "include/swiglu-math.wgsl"

struct Params {
  rows: u32,
  inter: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gu: array<f32>;
@group(0) @binding(2) var<storage, read_write> h: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.rows * p.inter) { return; }
  let row = idx / p.inter;
  let col = idx % p.inter;
  let g = row * 2u * p.inter + col;
  h[idx] = swigluForwardAt(gu[g], gu[g + p.inter]);
}
