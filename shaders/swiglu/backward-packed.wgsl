// swiglu/backward-packed — the gradients of swiglu/forward-packed, packed as its input is:
//   dgu[r, c]         = dgate[r, c] = dh ⊙ up ⊙ silu'(gate)
//   dgu[r, inter + c] = dup[r, c]   = dh ⊙ silu(gate)
// so one matmul against the stacked [W_gate; W_up] gives dn, and one gives both weight gradients.
//
// Shapes: gu, dgu f32 [rows, 2 · inter] (gate | up per row); dh f32 [rows, inter] (dense).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        gu
//   2 storage read        dh
//   3 storage read_write  dgu
// Dispatch: ceil(rows · inter / WG) workgroups of WG, folded into (x, y); one invocation per
//   (row, column) pair, writing both halves.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/swiglu-math.wgsl, the same bits as swiglu/backward on the unpacked operands.

#include "include/swiglu-math.wgsl"

struct Params {
  rows: u32,
  inter: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gu: array<f32>;
@group(0) @binding(2) var<storage, read> dh: array<f32>;
@group(0) @binding(3) var<storage, read_write> dgu: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.rows * p.inter) { return; }
  let row = idx / p.inter;
  let col = idx % p.inter;
  let g = row * 2u * p.inter + col;
  let grads = swigluBackwardAt(gu[g], gu[g + p.inter], dh[idx]);
  dgu[g] = grads.x;
  dgu[g + p.inter] = grads.y;
}
