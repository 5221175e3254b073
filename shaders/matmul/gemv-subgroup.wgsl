// matmul/gemv-subgroup — matmul/gemv-vec4's single-row product in one subgroup per workgroup: the
// WG_X lanes' sums of each weight row are added by a butterfly of subgroup shuffles instead of a tree
// in workgroup memory, so the kernel has no barrier. On a CPU adapter (llvmpipe) a workgroup of one
// SIMD-wide subgroup runs as one pass, while a barrier splits a wider one into coroutines that yield
// and resume at every level of the tree; measured 1.5–1.6× gemv-vec4 at 1 × 4096 × 4096 there.
//   C_b[0, n] = alpha * sum_k A_b[k] · B_b[n, k] + beta * C_b[0, n]     (M = 1, TRANS_B)
// Shapes, what vec4 access needs (K and the batch strides multiples of KC) and the B layout: as
// matmul/gemv-vec4.
// Bindings (group 0): 0 uniform Params, 1 read A (array<vec4<f32>>), 2 read B (array<vec4<u32>>: f32
//   bits, or with B_F16 = 1 f16 pairs), 3 read_write C (array<f32>).
// Dispatch: (ceil(N / TILE_N), 1, batch) workgroups of WG_X invocations, which must form one subgroup
//   with subgroup_invocation_id 0..WG_X-1 (the host refuses the variant unless the device's minimum
//   subgroup size is ≥ WG_X). Lane x sums chunks x, x + WG_X, … of the workgroup's TILE_N = THREAD_N
//   rows (include/gemv-vec4-sums), the butterfly adds the lanes' sums, and lane j stores row col0 + j.
//   The geometry is MATMUL_GEOMETRY['gemv-subgroup'] in src/kernels/matmul.ts, appended as constants.
// Edges: rows past N are clamped for loading and not stored.
// Numerics: gemv-vec4's f32 lane sums (over WG_X lanes), then s += shuffleXor(s, h) for h = WG_X/2, …, 1:
//   the halving tree's order, every lane ending with the same bits; deterministic, equal to the float64
//   sum to f32 rounding (not the bits of gemv-vec4, whose lanes split K differently). beta == 0 never
//   reads C.
enable subgroups;

#include "include/matmul-params.wgsl"

@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;

const_assert WG_Y == 1u && THREAD_M == 1u && TILE_M == 1u && TILE_N == THREAD_N && THREAD_N <= WG_X;
// The butterfly halves the lane distance each level.
const_assert 0u == (WG_X & (WG_X - 1u));
// Weights per B vec4 load: four f32, or eight f16.
const KC: u32 = select(4u, 8u, B_F16 != 0u);

#include "include/gemv-vec4-sums.wgsl"

@compute @workgroup_size(WG_X, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  let acc = gemvVec4Sums(wg, lane);
  var mine = 0.0; // row col0 + lane's total, for the lanes that store one
  for (var j = 0u; j < THREAD_N; j++) {
    var s = acc[j];
    for (var h = WG_X / 2u; h > 0u; h = h / 2u) { s += subgroupShuffleXor(s, h); }
    if (j == lane) { mine = s; }
  }
  let col = wg.x * TILE_N + lane;
  if (lane < THREAD_N && col < p.N) {
    let idx = wg.z * p.strideC + col;
    var v = p.alpha * mine;
    if (p.beta != 0.0) { v += p.beta * C[idx]; }
    C[idx] = v;
  }
}
