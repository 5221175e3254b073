// include/gemv-vec4-sums — the lane sums of matmul/gemv-vec4 and matmul/gemv-subgroup (their
// contract, bindings and dispatch are stated in matmul/gemv-vec4): lane `lane` of the workgroup at
// wg.x sums, for each of its THREAD_N weight rows col0 + j (col0 = wg.x · TILE_N, clamped to the last
// row for loading), the chunks of KC weights c = lane, lane + WG_X, … against the row of A (one vec4 of
// A per chunk loaded once for all rows). The including shader declares Params `p`, A
// (array<vec4<f32>>), B (array<vec4<u32>>), KC and the geometry constants; it adds the WG_X lanes' sums
// of each row itself (a tree in workgroup memory, or a subgroup butterfly).
// Numerics: f32 fma, k increasing within a chunk (dot4), the chunks of a lane in increasing order.

// acc + a · w over one vec4 of A and the four weights w (k increasing).
fn dot4(acc: f32, a: vec4<f32>, w: vec4<f32>) -> f32 {
  return fma(a.w, w.w, fma(a.z, w.z, fma(a.y, w.y, fma(a.x, w.x, acc))));
}

fn gemvVec4Sums(wg: vec3<u32>, lane: u32) -> array<f32, THREAD_N> {
  let col0 = wg.x * TILE_N;
  let baseA = wg.z * p.strideA / 4u;
  let chunks = p.K / KC;

  var rowB: array<u32, THREAD_N>; // vec4 index of each weight row's first chunk
  var acc: array<f32, THREAD_N>;
  for (var j = 0u; j < THREAD_N; j++) {
    rowB[j] = (wg.z * p.strideB + min(col0 + j, p.N - 1u) * p.K) / KC;
    acc[j] = 0.0;
  }
  for (var c = lane; c < chunks; c += WG_X) {
    if (B_F16 != 0u) {
      let a0 = A[baseA + 2u * c];
      let a1 = A[baseA + 2u * c + 1u];
      for (var j = 0u; j < THREAD_N; j++) {
        let w = B[rowB[j] + c];
        let lo = vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
        let hi = vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w));
        acc[j] = dot4(dot4(acc[j], a0, lo), a1, hi);
      }
    } else {
      let a = A[baseA + c];
      for (var j = 0u; j < THREAD_N; j++) { acc[j] = dot4(acc[j], a, bitcast<vec4<f32>>(B[rowB[j] + c])); }
    }
  }
  return acc;
}
