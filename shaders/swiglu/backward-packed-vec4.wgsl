// swiglu/backward-packed-vec4 — swiglu/backward-packed four columns per invocation: gu, dh and dgu
// are read and written as vec4<f32>, and each lane goes through the same scalar
// include/swiglu-math.wgsl, so the result has swiglu/backward-packed's bits:
//   dgu[r, c]         = dgate[r, c] = dh ⊙ up ⊙ silu'(gate)
//   dgu[r, inter + c] = dup[r, c]   = dh ⊙ silu(gate)
// The host takes it when inter is a multiple of 4.
//
// Shapes: gu, dgu f32 [rows, 2 · inter] (gate | up per row); dh f32 [rows, inter] (dense); all read
//   as vec4, with q = inter / 4 groups per half row.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        gu
//   2 storage read        dh
//   3 storage read_write  dgu
// Dispatch: ceil(rows · q / WG) workgroups of WG, folded into (x, y); one invocation per vec4 of dh,
//   writing both halves.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/swiglu-math.wgsl per lane, the bits of swiglu/backward-packed.

#include "include/swiglu-math.wgsl"

struct Params {
  rows: u32,
  // inter / 4: vec4 groups per half row.
  q: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gu: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> dh: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dgu: array<vec4<f32>>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.rows * p.q) { return; }
  let row = idx / p.q;
  let col = idx % p.q;
  let g = row * 2u * p.q + col;
  let gate = gu[g];
  let up = gu[g + p.q];
  let d = dh[idx];
  let x = swigluBackwardAt(gate.x, up.x, d.x);
  let y = swigluBackwardAt(gate.y, up.y, d.y);
  let z = swigluBackwardAt(gate.z, up.z, d.z);
  let w = swigluBackwardAt(gate.w, up.w, d.w);
  dgu[g] = vec4<f32>(x.x, y.x, z.x, w.x);
  dgu[g + p.q] = vec4<f32>(x.y, y.y, z.y, w.y);
}
