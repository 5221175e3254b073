// include/matmul-tile — the body of matmul/tiled and matmul/tiled-f16 (their contract, shapes,
// bindings and dispatch are stated in matmul/tiled): the slab staging, the register-blocked
// product and the store. The including shader declares, before including this file,
//   alias TILE_T = f32 or f16;   the element type of the workgroup tiles As and Bs,
// after include/matmul-common (Params, bindings, TRANS_A / TRANS_B, bAt). Loads are f32
// (include/matmul-tile-loads) and are converted to TILE_T as they are staged; staged elements are
// read back as f32, so products and sums are f32 either way. With TILE_T = f32 both conversions are
// the identity (the arithmetic is exactly that of f32 tiles); with f16 the staging rounds each
// operand to f16 (round to nearest even).

// K depth of a staged slab: internal to this kernel (the host's grid does not depend on it).
const SLAB: u32 = 16u;
const WG_SIZE: u32 = WG_X * WG_Y;
// Every invocation stages the same number of elements of each operand per slab.
const_assert 0u == (TILE_M * SLAB) % WG_SIZE && 0u == (TILE_N * SLAB) % WG_SIZE;
const_assert TILE_M == WG_Y * THREAD_M && TILE_N == WG_X * THREAD_N;

var<workgroup> As: array<TILE_T, TILE_M * SLAB>; // As[k * TILE_M + m]
var<workgroup> Bs: array<TILE_T, TILE_N * SLAB>; // Bs[k * TILE_N + n]

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
      As[ak * TILE_M + am] = TILE_T(loadA(baseA, row0 + am, k0 + ak));
    }
    for (var r = 0u; r < TILE_N * SLAB / WG_SIZE; r++) {
      let e = t + r * WG_SIZE;
      var bn: u32; var bk: u32;
      if (TRANS_B) { bn = e / SLAB; bk = e % SLAB; } else { bn = e % TILE_N; bk = e / TILE_N; }
      Bs[bk * TILE_N + bn] = TILE_T(loadB(baseB, k0 + bk, col0 + bn));
    }
    workgroupBarrier();
    for (var k = 0u; k < SLAB; k++) {
      var a: array<f32, THREAD_M>;
      var b: array<f32, THREAD_N>;
      for (var i = 0u; i < THREAD_M; i++) { a[i] = f32(As[k * TILE_M + ly + WG_Y * i]); }
      for (var j = 0u; j < THREAD_N; j++) { b[j] = f32(Bs[k * TILE_N + lx + WG_X * j]); }
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
