// matmul/tiled — register-blocked f32 matrix multiply, batched, any transpose, any shape.
//
// Computes, for every batch b:  C_b = alpha * op(A_b) · op(B_b) + beta * C_b
//   op(A) is M x K: A stored row-major [M, K], or [K, M] when TRANS_A (A^T given).
//   op(B) is K x N: B stored row-major [K, N], or [N, K] when TRANS_B (the X·W^T layout of Linear).
//   C is row-major [M, N].
// Bindings (group 0):
//   0 uniform Params (dynamic offset into the uniform arena)
//   1 storage read        A  (batch b starts at b * strideA elements; strideA = 0 broadcasts)
//   2 storage read        B  (b * strideB)
//   3 storage read_write  C  (b * strideC)
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), batch) workgroups of WG_X x WG_Y invocations.
// Each workgroup computes a TILE_M x TILE_N tile of C; each invocation a THREAD_M x THREAD_N block
// (rows ly + WG_Y·i, columns lx + WG_X·j). K advances in slabs of SLAB staged in workgroup memory
// (TILE_M·SLAB + TILE_N·SLAB f32). The geometry is MATMUL_GEOMETRY.tiled in
// src/kernels/matmul.ts, appended to this source as constants; the host's grid uses the same record.
// Numerics: f32 products accumulated in f32 in increasing k order within a slab; out-of-range
// elements load as 0, so M, N, K need not be multiples of the tile. beta == 0 never reads C
// (C may hold NaN garbage).

#include "include/matmul-common.wgsl"

// K depth of a staged slab: internal to this kernel (the host's grid does not depend on it).
const SLAB: u32 = 16u;
const WG_SIZE: u32 = WG_X * WG_Y;
// Every invocation stages the same number of elements of each operand per slab.
const_assert 0u == (TILE_M * SLAB) % WG_SIZE && 0u == (TILE_N * SLAB) % WG_SIZE;
const_assert TILE_M == WG_Y * THREAD_M && TILE_N == WG_X * THREAD_N;

var<workgroup> As: array<f32, TILE_M * SLAB>; // As[k * TILE_M + m]
var<workgroup> Bs: array<f32, TILE_N * SLAB>; // Bs[k * TILE_N + n]

#include "include/matmul-tile-loads.wgsl"

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let lx = lid.x;
  let ly = lid.y;
  let t = ly * WG_X + lx;
  let row0 = wg.y * TILE_M;
  let col0 = wg.x * TILE_N;
  let baseA = wg.z * p.strideA;
  let baseB = wg.z * p.strideB;
  let baseC = wg.z * p.strideC;

  var acc: array<array<f32, THREAD_N>, THREAD_M>;
  for (var i = 0u; i < THREAD_M; i++) {
    for (var j = 0u; j < THREAD_N; j++) { acc[i][j] = 0.0; }
  }

  let slabs = (p.K + SLAB - 1u) / SLAB;
  for (var s = 0u; s < slabs; s++) {
    let k0 = s * SLAB;
    // The workgroup stages TILE_M x SLAB elements of op(A) and SLAB x TILE_N of op(B), the same
    // count per invocation. The element order follows the storage layout so that neighbouring
    // invocations read neighbouring addresses.
    for (var r = 0u; r < TILE_M * SLAB / WG_SIZE; r++) {
      let e = t + r * WG_SIZE;
      var am: u32; var ak: u32;
      if (TRANS_A) { am = e % TILE_M; ak = e / TILE_M; } else { am = e / SLAB; ak = e % SLAB; }
      As[ak * TILE_M + am] = loadA(baseA, row0 + am, k0 + ak);
    }
    for (var r = 0u; r < TILE_N * SLAB / WG_SIZE; r++) {
      let e = t + r * WG_SIZE;
      var bn: u32; var bk: u32;
      if (TRANS_B) { bn = e / SLAB; bk = e % SLAB; } else { bn = e % TILE_N; bk = e / TILE_N; }
      Bs[bk * TILE_N + bn] = loadB(baseB, k0 + bk, col0 + bn);
    }
    workgroupBarrier();
    for (var k = 0u; k < SLAB; k++) {
      var a: array<f32, THREAD_M>;
      var b: array<f32, THREAD_N>;
      for (var i = 0u; i < THREAD_M; i++) { a[i] = As[k * TILE_M + ly + WG_Y * i]; }
      for (var j = 0u; j < THREAD_N; j++) { b[j] = Bs[k * TILE_N + lx + WG_X * j]; }
      for (var i = 0u; i < THREAD_M; i++) {
        for (var j = 0u; j < THREAD_N; j++) { acc[i][j] = fma(a[i], b[j], acc[i][j]); }
      }
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < THREAD_M; i++) {
    let row = row0 + ly + WG_Y * i;
    if (row >= p.M) { continue; }
    for (var j = 0u; j < THREAD_N; j++) {
      let col = col0 + lx + WG_X * j;
      if (col >= p.N) { continue; }
      let idx = baseC + row * p.N + col;
      var v = p.alpha * acc[i][j];
      if (p.beta != 0.0) { v += p.beta * C[idx]; }
      C[idx] = v;
    }
  }
}
