// matmul/gemv — the single-row product (M = 1) against a transposed weight: for every batch b,
//   C_b[0, n] = alpha * sum_k A_b[k] · B_b[n, k] + beta * C_b[0, n]
// i.e. one activation row times a Linear weight W [N, K] (TRANS_B), the shape of every projection
// when decoding one token. A [1, K] and [K, 1] are the same vector, so TRANS_A does not matter.
// Bindings (group 0): 0 uniform Params, 1 read A (f32), 2 read B (32-bit words; f32 or, with
//   B_F16 = 1, f16 pairs — see include/matmul-common), 3 read_write C (f32).
// Dispatch: (ceil(N / TILE_N), 1, batch) workgroups of WG_X invocations. A workgroup computes the
//   TILE_N = THREAD_N consecutive outputs from column wg.x · TILE_N: lane x sums the k pairs
//   (2q, 2q + 1) for q = x, x + WG_X, ... of all THREAD_N weight rows (neighbouring lanes read
//   neighbouring words, and each A pair is loaded once for THREAD_N rows), then the WG_X partial
//   sums of each column are added by a tree in workgroup memory. The geometry is
//   MATMUL_GEOMETRY.gemv in src/kernels/matmul.ts, appended as constants; the host's grid uses it.
// Edges: columns past N are clamped for loading and not stored; an odd K (f32 weights only: the
//   host refuses f16 weights with odd K or an odd batch stride, whose rows would start mid-word)
//   adds its last element in lane 0.
// Numerics: f32 fma accumulation; the order (strided over lanes, then a fixed tree) differs from
//   matmul/naive's sequential k order, so results agree with it to f32 rounding, not bit for bit.
//   Deterministic. beta == 0 never reads C.

#include "include/matmul-common.wgsl"

const_assert WG_Y == 1u && THREAD_M == 1u && TILE_M == 1u && TILE_N == THREAD_N;

#include "include/gemv-reduce.wgsl"

// The pair of op(B) storage elements (i, i + 1), i even for f16 storage.
fn bPair(i: u32) -> vec2<f32> {
  if (B_F16 != 0u) { return unpack2x16float(B[i >> 1u]); }
  return vec2<f32>(bitcast<f32>(B[i]), bitcast<f32>(B[i + 1u]));
}

@compute @workgroup_size(WG_X, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let lane = lid.x;
  let col0 = wg.x * TILE_N;
  let baseA = wg.z * p.strideA;
  let baseB = wg.z * p.strideB;

  var offB: array<u32, THREAD_N>;
  var acc: array<f32, THREAD_N>;
  for (var j = 0u; j < THREAD_N; j++) {
    offB[j] = baseB + min(col0 + j, p.N - 1u) * p.K;
    acc[j] = 0.0;
  }
  let pairs = p.K / 2u;
  for (var q = lane; q < pairs; q += WG_X) {
    let k = 2u * q;
    let a = vec2<f32>(A[baseA + k], A[baseA + k + 1u]);
    for (var j = 0u; j < THREAD_N; j++) {
      let b = bPair(offB[j] + k);
      acc[j] = fma(a.y, b.y, fma(a.x, b.x, acc[j]));
    }
  }
  if (lane == 0u && (p.K & 1u) == 1u) {
    let k = p.K - 1u;
    for (var j = 0u; j < THREAD_N; j++) { acc[j] = fma(A[baseA + k], bAt(offB[j] + k), acc[j]); }
  }

  gemvReduceStore(lane, col0, wg.z, acc);
}
