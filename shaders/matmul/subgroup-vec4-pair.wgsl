// matmul/subgroup-vec4-pair — both gradients of a linear layer y = x · Wᵀ in one dispatch:
//   problem 0 (input grad):  dX = alpha0 · dY · W    + beta0 · dX    M0 = R,   N = in, K0 = out
//   problem 1 (weight grad): dW = alpha1 · dYᵀ · X   + beta1 · dW    M1 = out, N = in, K1 = R
// with dY [R, out], W [out, in], X [R, in], dX [R, in], dW [out, in], all f32, row-major. A small
// step's backward is bound by the fixed cost of each dispatch on a CPU adapter, and these two
// products read the same dY and are independent, so one dispatch does both.
// Each tile is exactly a tile of matmul/subgroup-vec4 (include/matmul-subgroup-vec4): problem 0 with
// A = dY, B = W (neither transposed), problem 1 with A = dY transposed (stored [K1, M1]) and B = X,
// so every element has the bits of the two one-problem dispatches.
// Bindings (group 0): 0 uniform Params, 1 read dY, 2 read W, 3 read X, 4 read_write dX,
// 5 read_write dW, all array<vec4<f32>> (five storage bindings).
// Dispatch: (ceil(N / TILE_N), t0 + t1, 1) workgroups of WG_X invocations forming one subgroup (as
// matmul/subgroup-vec4), t0 = ceil(M0 / TILE_M) and t1 = ceil(M1 / TILE_M) the problems' row tiles.
// The rows of workgroups interleave the two problems in proportion (include/matmul-subgroup-vec4,
// subgroupVec4PairTile), not t0 then t1: llvmpipe
// hands each of its threads one contiguous range of workgroups, and a tile of one problem can be
// many times the work of the other's (at the mid config dx's K is 5632, dW's 128), so rows in
// order would leave one thread most of the work. No workgroup is idle. The host keeps
// (t0 + t1) · t0 below 2^32. Geometry MATMUL_GEOMETRY['subgroup-vec4'] (src/kernels/matmul.ts).
// What vec4 access needs: in, out and R multiples of 4 (the host checks, linearGradsPairUnfit).
// Numerics: those of matmul/subgroup-vec4 (f32 fma per k in increasing k order); beta == 0 never
// reads that problem's C.
enable subgroups;

struct Params {
  M0: u32,
  K0: u32,
  M1: u32,
  K1: u32,
  N: u32,
  alpha0: f32,
  beta0: f32,
  alpha1: f32,
  beta1: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dY: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> W: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> dX: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> dW: array<vec4<f32>>;

fn loadA4(q: u32) -> vec4<f32> { return dY[q]; }
fn loadB4(second: bool, q: u32) -> vec4<f32> {
  if (second) { return X[q]; }
  return W[q];
}
fn loadC4(second: bool, q: u32) -> vec4<f32> {
  if (second) { return dW[q]; }
  return dX[q];
}
fn storeC4(second: bool, q: u32, row: u32, col: u32, v: vec4<f32>) {
  if (second) { dW[q] = v; } else { dX[q] = v; }
}

#include "include/matmul-subgroup-vec4.wgsl"

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  subgroupVec4PairTile(wg.x, wg.y, lane, Vec4Problem(p.M0, p.N, p.K0, 0u, 0u, 0u, p.alpha0, p.beta0),
                       Vec4Problem(p.M1, p.N, p.K1, 0u, 0u, 0u, p.alpha1, p.beta1));
}
