// matmul/subgroup-vec4-residual — a linear layer and its residual add in one dispatch:
//   Y = X · Wᵀ + Res
// where two commands ran before (a copy of Res into Y, then matmul/subgroup-vec4 with beta = 1): the
// draft's o and down projections each add onto the hidden state they read. A small step on a CPU
// adapter is bound by the fixed cost of each command, copies included.
// Shapes: X f32 [M, K], W f32 [N, K] (a Linear weight, read transposed), Res and Y f32 [M, N].
// Bindings (group 0): 0 uniform Params, 1 read X, 2 read W, 3 read Res, 4 read_write Y, all as
// array<vec4<f32>> (four storage bindings). Y may not share a buffer with another operand (the host
// checks).
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), 1) workgroups of WG_X invocations forming one
// subgroup, as matmul/subgroup-vec4 with TRANS_B; geometry MATMUL_GEOMETRY['subgroup-vec4'] in
// src/kernels/matmul.ts. What vec4 access needs: K and N multiples of 4 (the host checks).
// Numerics: matmul/subgroup-vec4's tile (f32 fma per k in increasing k order) with alpha = 1 and
// beta = 1 on Res instead of on Y: every element has the bits of the copy and the matmul it replaces.
enable subgroups;

struct Params {
  M: u32,
  N: u32,
  K: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> W: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> Res: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> Y: array<vec4<f32>>;

fn loadA4(q: u32) -> vec4<f32> { return X[q]; }
fn loadB4(second: bool, q: u32) -> vec4<f32> { return W[q]; }
// C is read from Res and written to Y.
fn loadC4(second: bool, q: u32) -> vec4<f32> { return Res[q]; }
fn storeC4(second: bool, q: u32, row: u32, col: u32, v: vec4<f32>) { Y[q] = v; }

#include "include/matmul-subgroup-vec4.wgsl"

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  subgroupVec4Tile(wg.x, wg.y, lane, Vec4Problem(p.M, p.N, p.K, 0u, 0u, 0u, 1.0, 1.0), false, true, false);
}
