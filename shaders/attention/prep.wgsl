// attention/prep — first pass of the attention backward: per query row, D = rowsum(dO ⊙ O),
// packed with the forward's log-sum-exp so the dq / dkv kernels read both from one binding.
//
// Shapes (f32): O, dO [B, S, nH, hd]; L [B, nH, S]; rowStats [B, nH, S, 2] = (L, D).
// Bindings (group 0): 0 uniform Params, 1 read O, 2 read dO, 3 read L, 4 read_write rowStats.
// Dispatch: (ceil(S·nH / WG), B) workgroups of WG invocations; one invocation per (b, t, h) row,
// index t·nH + h within batch b (consecutive invocations read consecutive rows of O and dO).
// WG is the PREP_WG of the geometry record in src/kernels/attention.ts, appended to this source as a
// constant; the host's grid uses the same value.
// Numerics: f32 dot product over hd in increasing order. HEAD_DIM is an override constant.

#include "include/attention-params.wgsl"

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> O: array<f32>;
@group(0) @binding(2) var<storage, read> dO: array<f32>;
@group(0) @binding(3) var<storage, read> L: array<f32>;
@group(0) @binding(4) var<storage, read_write> rowStats: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = gid.y;
  let row = gid.x;
  if (row >= p.seq * p.heads) { return; }
  let t = row / p.heads;
  let h = row % p.heads;
  let base = (b * p.seq * p.heads + row) * HEAD_DIM;
  var dsum = 0.0;
  for (var d = 0u; d < HEAD_DIM; d++) { dsum = fma(dO[base + d], O[base + d], dsum); }
  let li = (b * p.heads + h) * p.seq + t;
  rowStats[2u * li] = L[li];
  rowStats[2u * li + 1u] = dsum;
}
