// matmul/blocked — register-blocked f32 matrix multiply without workgroup memory or barriers; the
// no-feature variant tuned for CPU adapters (llvmpipe, SwiftShader), where a workgroup runs on one
// CPU thread, invocations are SIMD lanes, every storage load is gathered lane by lane and a barrier
// is a coroutine switch. Staging tiles in workgroup memory costs more there than it saves; a large
// register block per invocation (THREAD_M + THREAD_N loads per k for THREAD_M · THREAD_N fmas) is
// what pays.
//
// Same contract as matmul/tiled: C_b = alpha * op(A_b) · op(B_b) + beta * C_b, TRANS_A / TRANS_B
// storage layouts, batch strides (0 broadcasts).
// Bindings (group 0): 0 uniform Params, 1 read A, 2 read B, 3 read_write C.
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), batch) workgroups of WG_X x WG_Y invocations.
// Each workgroup computes a TILE_M x TILE_N tile of C; invocation (x, y) a THREAD_M x THREAD_N
// block: rows y + WG_Y·i, columns x + WG_X·j (neighbouring lanes read neighbouring columns of B).
// The geometry is MATMUL_GEOMETRY.blocked in src/kernels/matmul.ts (where its tuning is recorded),
// appended to this source as constants; the host's grid uses the same record.
// Edges: row and column indices are clamped into range for loading, so the K loop has no branches;
// only in-range elements are stored. K may be any size.
// Numerics: f32 products accumulated by fma in f32, in increasing k order (the same order as
// matmul/naive). beta == 0 never reads C (C may hold NaN garbage).

#include "include/matmul-common.wgsl"

const_assert TILE_M == WG_Y * THREAD_M && TILE_N == WG_X * THREAD_N;
// Columns are accumulated four at a time in vec4s.
const_assert THREAD_N % 4u == 0u;
const VEC_N: u32 = THREAD_N / 4u;

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let row0 = wg.y * TILE_M + lid.y;
  let col0 = wg.x * TILE_N + lid.x;
  let baseA = wg.z * p.strideA;
  let baseB = wg.z * p.strideB;

  // Element offsets of op(A)[row_i, 0] and op(B)[0, col_j], and the step per unit of k.
  var offA: array<u32, THREAD_M>;
  var offB: array<u32, THREAD_N>;
  for (var i = 0u; i < THREAD_M; i++) {
    let r = min(row0 + WG_Y * i, p.M - 1u);
    if (TRANS_A) { offA[i] = baseA + r; } else { offA[i] = baseA + r * p.K; }
  }
  for (var j = 0u; j < THREAD_N; j++) {
    let c = min(col0 + WG_X * j, p.N - 1u);
    if (TRANS_B) { offB[j] = baseB + c * p.K; } else { offB[j] = baseB + c; }
  }
  var stepA = 1u;
  if (TRANS_A) { stepA = p.M; }
  var stepB = p.N;
  if (TRANS_B) { stepB = 1u; }

  // acc[i][j / 4][j % 4]: row row0 + WG_Y·i, column col0 + WG_X·j.
  var acc: array<array<vec4<f32>, VEC_N>, THREAD_M>;
  for (var i = 0u; i < THREAD_M; i++) {
    for (var j = 0u; j < VEC_N; j++) { acc[i][j] = vec4<f32>(0.0); }
  }

  for (var k = 0u; k < p.K; k++) {
    var a: array<f32, THREAD_M>;
    var b: array<vec4<f32>, VEC_N>;
    for (var i = 0u; i < THREAD_M; i++) { a[i] = A[offA[i] + k * stepA]; }
    for (var j = 0u; j < VEC_N; j++) {
      let kb = k * stepB;
      b[j] = vec4<f32>(bAt(offB[4u * j] + kb), bAt(offB[4u * j + 1u] + kb), bAt(offB[4u * j + 2u] + kb), bAt(offB[4u * j + 3u] + kb));
    }
    for (var i = 0u; i < THREAD_M; i++) {
      for (var j = 0u; j < VEC_N; j++) { acc[i][j] = fma(vec4<f32>(a[i]), b[j], acc[i][j]); }
    }
  }

  let baseC = wg.z * p.strideC;
  for (var i = 0u; i < THREAD_M; i++) {
    let row = row0 + WG_Y * i;
    if (row >= p.M) { break; }
    for (var j = 0u; j < THREAD_N; j++) {
      let col = col0 + WG_X * j;
      if (col >= p.N) { break; }
      let idx = baseC + row * p.N + col;
      var v = p.alpha * acc[i][j / 4u][j % 4u];
      if (p.beta != 0.0) { v += p.beta * C[idx]; }
      C[idx] = v;
    }
  }
}
