// swiglu/forward-packed-vec4 — swiglu/forward-packed four columns per invocation: gu and h are read
// and written as vec4<f32>, and each lane goes through the same scalar include/swiglu-math.wgsl, so
// the result has swiglu/forward-packed's bits. One 16-byte access where the scalar kernel makes four:
// on a CPU adapter each per-invocation access is its own load or store (bench/RESULTS.md, "Fewer
// barriers, wider loads"). The host takes it when inter is a multiple of 4.
//
// Shapes: gu f32 [rows, 2 · inter]: row r holds gate[r, 0..inter) then up[r, 0..inter);
//   h f32 [rows, inter] (dense); both read as vec4, with q = inter / 4 groups per half row.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        gu
//   2 storage read_write  h
// Dispatch: ceil(rows · q / WG) workgroups of WG, folded into (x, y); one invocation per vec4 of h.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/swiglu-math.wgsl per lane, the bits of swiglu/forward-packed.

#include "include/swiglu-math.wgsl"

struct Params {
  rows: u32,
  // inter / 4: vec4 groups per half row.
  q: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gu: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> h: array<vec4<f32>>;

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
  h[idx] = vec4<f32>(swigluForwardAt(gate.x, up.x), swigluForwardAt(gate.y, up.y),
                     swigluForwardAt(gate.z, up.z), swigluForwardAt(gate.w, up.w));
}
