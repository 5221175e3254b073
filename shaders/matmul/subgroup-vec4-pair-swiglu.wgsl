// matmul/subgroup-vec4-pair-swiglu — the backward of a SwiGLU MLP's down projection in one dispatch,
// with act = silu(gate) ⊙ up stored by the forward and gate | up packed per row in GU:
//   problem 0: dAct = dY · W, stored through SwiGLU's backward as dGU = dgate | dup per row:
//              dgate = dAct ⊙ up ⊙ silu'(gate),  dup = dAct ⊙ silu(gate)      M0 = R,  K0 = O
//   problem 1: dW += dYᵀ · Act                                                M1 = O,  K1 = R
// where two commands ran before (matmul/subgroup-vec4-pair into a dAct tensor, then
// swiglu/backward-packed-vec4), so dAct never goes through memory. A small step on a CPU adapter is
// bound by the fixed cost of each dispatch.
// Shapes: dY f32 [R, O] (O the hidden width), W f32 [O, I] (the down projection), Act f32 [R, I],
// GU and dGU f32 [R, 2I] (gate | up per row), dW f32 [O, I].
// Bindings (group 0): 0 uniform Params, 1 read dY, 2 read W, 3 read Act, 4 read GU, 5 read_write dGU,
// 6 read_write dW, all array<vec4<f32>> (six storage bindings); no written buffer shared (the host
// checks).
// Dispatch: as matmul/subgroup-vec4-pair: (ceil(I / TILE_N), t0 + t1, 1) workgroups of WG_X
// invocations forming one subgroup, t0 = ceil(R / TILE_M), t1 = ceil(O / TILE_M), the two problems'
// row tiles interleaved in proportion (subgroupVec4PairTile); geometry MATMUL_GEOMETRY['subgroup-vec4'] in
// src/kernels/matmul.ts. What vec4 access needs: R, O and I multiples of 4 (the host checks).
// Numerics: each tile is matmul/subgroup-vec4's (f32 fma per k in increasing k order, alpha 1, dAct
// never read back, dW accumulated with beta = 1); the SwiGLU backward is include/swiglu-math per lane
// on the f32 dAct, the bits of swiglu/backward-packed-vec4. Every element has the bits of the two
// commands it replaces.
enable subgroups;

#include "include/swiglu-math.wgsl"

struct Params {
  M0: u32,
  K0: u32,
  M1: u32,
  K1: u32,
  N: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dY: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> W: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> Act: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> GU: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> dGU: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> dW: array<vec4<f32>>;

fn loadA4(q: u32) -> vec4<f32> { return dY[q]; }
fn loadB4(second: bool, q: u32) -> vec4<f32> {
  if (second) { return Act[q]; }
  return W[q];
}
// Only problem 1 (dW, beta 1) reads its C.
fn loadC4(second: bool, q: u32) -> vec4<f32> { return dW[q]; }
// Problem 0 stores dAct's quad (row, col) as the SwiGLU gradients of the same columns of gate and up,
// in rows of 2 · N/4 quads.
fn storeC4(second: bool, q: u32, row: u32, col: u32, v: vec4<f32>) {
  if (second) {
    dW[q] = v;
    return;
  }
  let halfQuads = p.N / 4u; // quads in one half (gate or up) of a packed row
  let g = row * 2u * halfQuads + col;
  let gate = GU[g];
  let up = GU[g + halfQuads];
  let x = swigluBackwardAt(gate.x, up.x, v.x);
  let y = swigluBackwardAt(gate.y, up.y, v.y);
  let z = swigluBackwardAt(gate.z, up.z, v.z);
  let w = swigluBackwardAt(gate.w, up.w, v.w);
  dGU[g] = vec4<f32>(x.x, y.x, z.x, w.x);
  dGU[g + halfQuads] = vec4<f32>(x.y, y.y, z.y, w.y);
}

#include "include/matmul-subgroup-vec4.wgsl"

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  subgroupVec4PairTile(wg.x, wg.y, lane, Vec4Problem(p.M0, p.N, p.K0, 0u, 0u, 0u, 1.0, 0.0),
                       Vec4Problem(p.M1, p.N, p.K1, 0u, 0u, 0u, 1.0, 1.0));
}
