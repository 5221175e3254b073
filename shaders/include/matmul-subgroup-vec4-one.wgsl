// include/matmul-subgroup-vec4-one — the entry point of the one-problem kernels matmul/subgroup-vec4 and
// matmul/subgroup-vec4-f16w (contract in matmul/subgroup-vec4): A and C accessors over their bindings
// A and C (array<vec4<f32>>), and a main that runs tile (wg.x, wg.y) of batch matrix wg.z through
// include/matmul-subgroup-vec4 with the uniform Params and the TRANS_A / TRANS_B overrides. The
// including shader declares A, B, C and loadB4.

fn loadA4(q: u32) -> vec4<f32> { return A[q]; }
fn loadC4(second: bool, q: u32) -> vec4<f32> { return C[q]; }
fn storeC4(second: bool, q: u32, row: u32, col: u32, v: vec4<f32>) { C[q] = v; }

#include "include/matmul-subgroup-vec4.wgsl"

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  let pr = Vec4Problem(p.M, p.N, p.K, wg.z * (p.strideA / 4u), wg.z * (p.strideB / 4u), wg.z * (p.strideC / 4u), p.alpha, p.beta);
  subgroupVec4Tile(wg.x, wg.y, lane, pr, TRANS_A, TRANS_B, false);
}
