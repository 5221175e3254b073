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
// Dispatch: (ceil(N / 64), ceil(M / 64), batch) workgroups of 16 x 16 invocations.
// Each workgroup computes a 64 x 64 tile of C; each invocation a 4 x 4 block (rows ly + 16i,
// columns lx + 16j). K advances in slabs of 16 staged in workgroup memory (2 x 4 KiB).
// Numerics: f32 products accumulated in f32 in increasing k order within a slab; out-of-range
// elements load as 0, so M, N, K need not be multiples of the tile. beta == 0 never reads C
// (C may hold NaN garbage).

#include "include/matmul-common.wgsl"

const TILE: u32 = 64u;
const SLAB: u32 = 16u;

var<workgroup> As: array<f32, 1024>; // As[k * 64 + m]
var<workgroup> Bs: array<f32, 1024>; // Bs[k * 64 + n]

#include "include/matmul-tile-loads.wgsl"

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let lx = lid.x;
  let ly = lid.y;
  let t = ly * 16u + lx;
  let row0 = wg.y * TILE;
  let col0 = wg.x * TILE;
  let baseA = wg.z * p.strideA;
  let baseB = wg.z * p.strideB;
  let baseC = wg.z * p.strideC;

  var acc: array<array<f32, 4>, 4>;
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 4u; j++) { acc[i][j] = 0.0; }
  }

  let slabs = (p.K + SLAB - 1u) / SLAB;
  for (var s = 0u; s < slabs; s++) {
    let k0 = s * SLAB;
    // 256 invocations stage 64 x 16 elements of each operand, 4 each. The element order follows
    // the storage layout so that neighbouring invocations read neighbouring addresses.
    for (var r = 0u; r < 4u; r++) {
      let e = t + r * 256u;
      var am: u32; var ak: u32;
      if (TRANS_A) { am = e % TILE; ak = e / TILE; } else { am = e / SLAB; ak = e % SLAB; }
      As[ak * TILE + am] = loadA(baseA, row0 + am, k0 + ak);
      var bn: u32; var bk: u32;
      if (TRANS_B) { bn = e / SLAB; bk = e % SLAB; } else { bn = e % TILE; bk = e / TILE; }
      Bs[bk * TILE + bn] = loadB(baseB, k0 + bk, col0 + bn);
    }
    workgroupBarrier();
    for (var k = 0u; k < SLAB; k++) {
      var a: array<f32, 4>;
      var b: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) { a[i] = As[k * TILE + ly + 16u * i]; }
      for (var j = 0u; j < 4u; j++) { b[j] = Bs[k * TILE + lx + 16u * j]; }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) { acc[i][j] = fma(a[i], b[j], acc[i][j]); }
      }
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < 4u; i++) {
    let row = row0 + ly + 16u * i;
    if (row >= p.M) { continue; }
    for (var j = 0u; j < 4u; j++) {
      let col = col0 + lx + 16u * j;
      if (col >= p.N) { continue; }
      let idx = baseC + row * p.N + col;
      var v = p.alpha * acc[i][j];
      if (p.beta != 0.0) { v += p.beta * C[idx]; }
      C[idx] = v;
    }
  }
}
