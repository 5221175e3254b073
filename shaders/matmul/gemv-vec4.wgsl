// matmul/gemv-vec4 — matmul/gemv reading its operands as vec4s: the activation row four f32 at a time
// and each weight row four 32-bit words at a time (four f32 weights, or eight f16), where matmul/gemv
// reads one word. On a CPU adapter a storage load costs about the same per lane at any width, and a
// GEMV is nothing but loads, so this divides the loads per weight by four.
//   C_b[0, n] = alpha * sum_k A_b[k] · B_b[n, k] + beta * C_b[0, n]     (M = 1, TRANS_B)
// What vec4 access needs (the host refuses other shapes, naming them, and the policy then picks
// matmul/gemv or naive): K and the batch strides multiples of KC, the weights per B load (4 for f32
// weights, 8 for f16), so that every weight row and every batch starts on a vec4.
// Bindings (group 0): 0 uniform Params, 1 read A (array<vec4<f32>>), 2 read B (array<vec4<u32>>: f32
//   bits, or with B_F16 = 1 f16 pairs, element i in the low half of word i / 2 when i is even),
//   3 read_write C (array<f32>).
// Dispatch: (ceil(N / TILE_N), 1, batch) workgroups of WG_X invocations. A workgroup computes the
//   TILE_N = THREAD_N consecutive outputs from column wg.x · TILE_N: lane x sums the chunks of KC
//   weights c = x, x + WG_X, ... of all THREAD_N rows (one vec4 of A per four k is loaded once for all
//   of them), then a tree in workgroup memory adds the WG_X partial sums of each column. The geometry
//   is MATMUL_GEOMETRY['gemv-vec4'] in src/kernels/matmul.ts, appended as constants.
// Edges: columns past N are clamped for loading and not stored.
// Numerics: f32 fma accumulation, k increasing within a chunk, chunks strided over lanes, then a fixed
//   tree: deterministic, and equal to the float64 sum to f32 rounding (not the bits of naive or gemv).
//   beta == 0 never reads C.

#include "include/matmul-params.wgsl"

@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;

const_assert WG_Y == 1u && THREAD_M == 1u && TILE_M == 1u && TILE_N == THREAD_N;
// Weights per B vec4 load: four f32, or eight f16.
const KC: u32 = select(4u, 8u, B_F16 != 0u);

#include "include/gemv-reduce.wgsl"

#include "include/gemv-vec4-sums.wgsl"

@compute @workgroup_size(WG_X, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  gemvReduceStore(lid.x, wg.x * TILE_N, wg.z, gemvVec4Sums(wg, lid.x));
}
