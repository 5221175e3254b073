// matmul/subgroup — f32 matrix multiply for CPU-like adapters with subgroups (llvmpipe: one
// workgroup per CPU thread, one subgroup = one 8-lane SIMD vector). Every storage load there is a
// per-lane gather, so the kernel loads each operand element once and shares A across the lanes with
// subgroupBroadcast (a register permute) instead of loading it in every lane.
//
// Same contract as matmul/tiled: C_b = alpha * op(A_b) · op(B_b) + beta * C_b, TRANS_A / TRANS_B
// storage layouts, batch strides (0 broadcasts).
// Bindings (group 0): 0 uniform Params, 1 read A, 2 read B, 3 read_write C.
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), batch) workgroups of WG_X invocations, which
// must form one subgroup with subgroup_invocation_id 0..WG_X-1 (true when the subgroup size is at
// least WG_X; the host refuses this variant otherwise). Each workgroup computes a TILE_M x TILE_N
// tile of C: lane l owns columns col0 + l + WG_X·j (j < THREAD_N, a vec4 of accumulators per row)
// for all THREAD_M rows; per k it loads A rows l + WG_X·q (q = 0..3) and its THREAD_N B elements,
// and takes row i's A value from lane i % WG_X. The geometry is MATMUL_GEOMETRY.subgroup in
// src/kernels/matmul.ts (where its tuning is recorded), appended to this source as constants; the
// unrolled rank-1 update below is written for exactly 8 lanes x (32 rows, 4 columns), which the
// const_asserts check, so a different geometry fails to compile instead of computing garbage.
// Edges: indices are clamped into range for loading, so the K loop has no branches; only
// in-range elements are stored. K may be any size.
// Numerics: f32 products accumulated by fma in f32, in increasing k order (the same order as
// matmul/naive). beta == 0 never reads C (C may hold NaN garbage).
enable subgroups;

#include "include/matmul-common.wgsl"

const_assert WG_X == 8u && WG_Y == 1u && THREAD_M == 4u * WG_X && THREAD_N == 4u;
const_assert TILE_M == WG_Y * THREAD_M && TILE_N == WG_X * THREAD_N;

// acc[i][j]: row row0 + i, column col0 + lane + WG_X·j.
var<private> acc: array<vec4<f32>, THREAD_M>;

// One rank-1 update: a.x / a.y / a.z / a.w hold op(A)[row0 + lane + 8q, k] for q = 0..3, b the
// lane's four op(B)[k, col] values; row 8q + i takes its A value from lane i. Lane indices of
// subgroupBroadcast must be constants, hence unrolled.
fn rank1(a: vec4<f32>, b: vec4<f32>) {
  acc[0] = fma(vec4<f32>(subgroupBroadcast(a.x, 0u)), b, acc[0]);
  acc[1] = fma(vec4<f32>(subgroupBroadcast(a.x, 1u)), b, acc[1]);
  acc[2] = fma(vec4<f32>(subgroupBroadcast(a.x, 2u)), b, acc[2]);
  acc[3] = fma(vec4<f32>(subgroupBroadcast(a.x, 3u)), b, acc[3]);
  acc[4] = fma(vec4<f32>(subgroupBroadcast(a.x, 4u)), b, acc[4]);
  acc[5] = fma(vec4<f32>(subgroupBroadcast(a.x, 5u)), b, acc[5]);
  acc[6] = fma(vec4<f32>(subgroupBroadcast(a.x, 6u)), b, acc[6]);
  acc[7] = fma(vec4<f32>(subgroupBroadcast(a.x, 7u)), b, acc[7]);
  acc[8] = fma(vec4<f32>(subgroupBroadcast(a.y, 0u)), b, acc[8]);
  acc[9] = fma(vec4<f32>(subgroupBroadcast(a.y, 1u)), b, acc[9]);
  acc[10] = fma(vec4<f32>(subgroupBroadcast(a.y, 2u)), b, acc[10]);
  acc[11] = fma(vec4<f32>(subgroupBroadcast(a.y, 3u)), b, acc[11]);
  acc[12] = fma(vec4<f32>(subgroupBroadcast(a.y, 4u)), b, acc[12]);
  acc[13] = fma(vec4<f32>(subgroupBroadcast(a.y, 5u)), b, acc[13]);
  acc[14] = fma(vec4<f32>(subgroupBroadcast(a.y, 6u)), b, acc[14]);
  acc[15] = fma(vec4<f32>(subgroupBroadcast(a.y, 7u)), b, acc[15]);
  acc[16] = fma(vec4<f32>(subgroupBroadcast(a.z, 0u)), b, acc[16]);
  acc[17] = fma(vec4<f32>(subgroupBroadcast(a.z, 1u)), b, acc[17]);
  acc[18] = fma(vec4<f32>(subgroupBroadcast(a.z, 2u)), b, acc[18]);
  acc[19] = fma(vec4<f32>(subgroupBroadcast(a.z, 3u)), b, acc[19]);
  acc[20] = fma(vec4<f32>(subgroupBroadcast(a.z, 4u)), b, acc[20]);
  acc[21] = fma(vec4<f32>(subgroupBroadcast(a.z, 5u)), b, acc[21]);
  acc[22] = fma(vec4<f32>(subgroupBroadcast(a.z, 6u)), b, acc[22]);
  acc[23] = fma(vec4<f32>(subgroupBroadcast(a.z, 7u)), b, acc[23]);
  acc[24] = fma(vec4<f32>(subgroupBroadcast(a.w, 0u)), b, acc[24]);
  acc[25] = fma(vec4<f32>(subgroupBroadcast(a.w, 1u)), b, acc[25]);
  acc[26] = fma(vec4<f32>(subgroupBroadcast(a.w, 2u)), b, acc[26]);
  acc[27] = fma(vec4<f32>(subgroupBroadcast(a.w, 3u)), b, acc[27]);
  acc[28] = fma(vec4<f32>(subgroupBroadcast(a.w, 4u)), b, acc[28]);
  acc[29] = fma(vec4<f32>(subgroupBroadcast(a.w, 5u)), b, acc[29]);
  acc[30] = fma(vec4<f32>(subgroupBroadcast(a.w, 6u)), b, acc[30]);
  acc[31] = fma(vec4<f32>(subgroupBroadcast(a.w, 7u)), b, acc[31]);
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  let row0 = wg.y * TILE_M;
  let col0 = wg.x * TILE_N + lane;
  let baseA = wg.z * p.strideA;
  let baseB = wg.z * p.strideB;

  // Element offsets of op(A)[row, 0] for this lane's four rows and of op(B)[0, col] for its four
  // columns, and the step per unit of k.
  let spread = vec4<u32>(0u, 1u, 2u, 3u) * WG_X;
  let r = min(vec4<u32>(row0 + lane) + spread, vec4<u32>(p.M - 1u));
  let c = min(vec4<u32>(col0) + spread, vec4<u32>(p.N - 1u));
  var offA: vec4<u32>; var stepA: u32;
  if (TRANS_A) { offA = vec4<u32>(baseA) + r; stepA = p.M; } else { offA = vec4<u32>(baseA) + r * p.K; stepA = 1u; }
  var offB: vec4<u32>; var stepB: u32;
  if (TRANS_B) { offB = vec4<u32>(baseB) + c * p.K; stepB = 1u; } else { offB = vec4<u32>(baseB) + c; stepB = p.N; }

  for (var i = 0u; i < THREAD_M; i++) { acc[i] = vec4<f32>(0.0); }

  // Two k per iteration: all sixteen loads are issued before the 64 vec4 fmas that use them.
  var k = 0u;
  for (; k + 2u <= p.K; k += 2u) {
    let oa = offA + vec4<u32>(k * stepA);
    let ob = offB + vec4<u32>(k * stepB);
    let a0 = vec4<f32>(A[oa.x], A[oa.y], A[oa.z], A[oa.w]);
    let b0 = vec4<f32>(bAt(ob.x), bAt(ob.y), bAt(ob.z), bAt(ob.w));
    let a1 = vec4<f32>(A[oa.x + stepA], A[oa.y + stepA], A[oa.z + stepA], A[oa.w + stepA]);
    let b1 = vec4<f32>(bAt(ob.x + stepB), bAt(ob.y + stepB), bAt(ob.z + stepB), bAt(ob.w + stepB));
    rank1(a0, b0);
    rank1(a1, b1);
  }
  if (k < p.K) {
    let oa = offA + vec4<u32>(k * stepA);
    let ob = offB + vec4<u32>(k * stepB);
    rank1(vec4<f32>(A[oa.x], A[oa.y], A[oa.z], A[oa.w]), vec4<f32>(bAt(ob.x), bAt(ob.y), bAt(ob.z), bAt(ob.w)));
  }

  let baseC = wg.z * p.strideC;
  for (var i = 0u; i < THREAD_M; i++) {
    let row = row0 + i;
    if (row >= p.M) { break; }
    for (var j = 0u; j < THREAD_N; j++) {
      let col = col0 + WG_X * j;
      if (col >= p.N) { break; }
      let idx = baseC + row * p.N + col;
      var v = p.alpha * acc[i][j];
      if (p.beta != 0.0) { v += p.beta * C[idx]; }
      C[idx] = v;
    }
  }
}
