// matmul/subgroup-vec4-swiglu — a SwiGLU MLP's gate and up projections and its activation in one
// dispatch, with the gate and up weights stacked as one Linear weight W = [W_gate; W_up]:
//   GU = X · Wᵀ  (gate | up per row),   Act = silu(gate) ⊙ up
// where two commands ran before (matmul/subgroup-vec4 into GU, then swiglu/forward-packed-vec4), so
// the activation needs no dispatch of its own. A small step on a CPU adapter is bound by the fixed
// cost of each dispatch.
// Shapes: X f32 [R, H], W f32 [2I, H] (gate rows, then up rows), GU f32 [R, 2I], Act f32 [R, I].
// Bindings (group 0): 0 uniform Params, 1 read X, 2 read W, 3 read_write GU, 4 read_write Act, all
// array<vec4<f32>> (four storage bindings); no written buffer shared (the host checks).
// Dispatch: (ceil(I / TILE_N), ceil(R / TILE_M), 1) workgroups of WG_X invocations forming one
// subgroup; each computes one tile of gate, stores it, then the same tile of up, whose store reads
// the gate it stored (the same invocation wrote it) and writes Act. Geometry
// MATMUL_GEOMETRY['subgroup-vec4'] in src/kernels/matmul.ts. What vec4 access needs: H and I
// multiples of 4 (the host checks).
// Numerics: each tile is matmul/subgroup-vec4's with transposed B (f32 fma per k in increasing k
// order, alpha 1, beta 0), and the activation is include/swiglu-math per lane: every element of GU
// and Act has the bits of the two commands it replaces.
enable subgroups;

#include "include/swiglu-math.wgsl"

struct Params {
  M: u32,
  // I: the width of gate, of up and of Act.
  N: u32,
  K: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> W: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> GU: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> Act: array<vec4<f32>>;

fn loadA4(q: u32) -> vec4<f32> { return X[q]; }
// The up tile's B starts I rows into W (its problem's baseB): one weight buffer for both tiles.
fn loadB4(second: bool, q: u32) -> vec4<f32> { return W[q]; }
// beta is 0: C is never read.
fn loadC4(second: bool, q: u32) -> vec4<f32> { return vec4<f32>(0.0); }
// Quad (row, col) of gate (first) or up (second), in rows of 2 · N/4 quads; up's store also writes Act.
fn storeC4(second: bool, q: u32, row: u32, col: u32, v: vec4<f32>) {
  let halfQuads = p.N / 4u;
  let g = row * 2u * halfQuads + col;
  if (!second) {
    GU[g] = v;
    return;
  }
  GU[g + halfQuads] = v;
  let gate = GU[g];
  Act[row * halfQuads + col] = vec4<f32>(swigluForwardAt(gate.x, v.x), swigluForwardAt(gate.y, v.y),
                                         swigluForwardAt(gate.z, v.z), swigluForwardAt(gate.w, v.w));
}

#include "include/matmul-subgroup-vec4.wgsl"

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  subgroupVec4Tile(wg.x, wg.y, lane, Vec4Problem(p.M, p.N, p.K, 0u, 0u, 0u, 1.0, 0.0), false, true, false);
  subgroupVec4Tile(wg.x, wg.y, lane, Vec4Problem(p.M, p.N, p.K, 0u, p.N * p.K / 4u, 0u, 1.0, 0.0), false, true, true);
}
