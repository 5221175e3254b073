// matmul/naive — one output element per invocation; the baseline every faster variant is compared
// against (correctness oracle on the GPU side, and the "1x" of the benchmark).
//
// Same contract as matmul/tiled: C_b = alpha * op(A_b) · op(B_b) + beta * C_b with TRANS_A / TRANS_B
// storage layouts and batch strides (0 broadcasts).
// Bindings: 0 uniform Params, 1 read A, 2 read B, 3 read_write C.
// Dispatch: (ceil(N / WG_X), ceil(M / WG_Y), batch) workgroups of WG_X x WG_Y invocations, one
// output element each. WG_X, WG_Y (and THREAD_M = THREAD_N = 1) are MATMUL_GEOMETRY.naive in
// src/kernels/matmul.ts, appended to this source as constants; the host's grid uses the same record.
// Numerics: f32 accumulation in increasing k order; beta == 0 never reads C.

#include "include/matmul-common.wgsl"

// One output per invocation, so the workgroup tile is the workgroup itself.
const_assert THREAD_M == 1u && THREAD_N == 1u;

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.y;
  let col = gid.x;
  if (row >= p.M || col >= p.N) { return; }
  let baseA = gid.z * p.strideA;
  let baseB = gid.z * p.strideB;
  var acc = 0.0;
  for (var k = 0u; k < p.K; k++) {
    var a: f32; var b: f32;
    if (TRANS_A) { a = A[baseA + k * p.M + row]; } else { a = A[baseA + row * p.K + k]; }
    if (TRANS_B) { b = bAt(baseB + col * p.K + k); } else { b = bAt(baseB + k * p.N + col); }
    acc = fma(a, b, acc);
  }
  let idx = gid.z * p.strideC + row * p.N + col;
  var v = p.alpha * acc;
  if (p.beta != 0.0) { v += p.beta * C[idx]; }
  C[idx] = v;
}
