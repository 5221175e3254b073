// include/matmul-subgroup-vec4 — the body of matmul/subgroup-vec4, -f16w, -residual, -swiglu, -pair
// and -pair-swiglu (the tile's contract, edges and numerics are stated in
// matmul/subgroup-vec4; each kernel's own header states its bindings and dispatch): the unrolled
// rank-4 updates, the vec4 loads of A in either layout, and the
// store, as one function over one 32 x 32 tile of one problem (`subgroupVec4Tile`). The including
// shader declares its bindings and, before including this file,
//   fn loadA4(q: u32) -> vec4<f32>;                   A's elements 4q .. 4q+3 (an index in quads)
//   fn loadB4(second: bool, q: u32) -> vec4<f32>;     B's, as one vec4<f32> (f32 weights) or one
//                                                     vec2<u32> of four f16 (f16 weights)
//   fn loadC4(second: bool, q: u32) -> vec4<f32>;
//   fn storeC4(second: bool, q: u32, row: u32, col: u32, v: vec4<f32>);
// storeC4 also gets the quad's row and column quad in C (q = baseC + row · N/4 + col), for a store
// through an epilogue (matmul/subgroup-vec4-pair-swiglu writes SwiGLU's gradients of that position).
// The loads keep flat indices: passing rows and columns to them too measured 8% slower on llvmpipe.
// `second` picks the second problem's B and C in the pair kernels; the one-problem shaders have one B
// and one C and ignore it. transA, transB and second are constants at every call site, so the
// compiler folds the branches on them away (the shader compiler inlines every function).
const_assert WG_X == 8u && WG_Y == 1u && THREAD_M == 4u * WG_X && THREAD_N == 4u;
const_assert TILE_M == WG_Y * THREAD_M && TILE_N == WG_X * THREAD_N;

// acc[i]: row row0 + i, columns col0 + 4·lane .. + 3.
var<private> acc: array<vec4<f32>, THREAD_M>;

// Row i's four k (v.x first), times the four B rows of those k.
fn rank4(i: u32, v: vec4<f32>, b: array<vec4<f32>, 4>) {
  acc[i] = fma(vec4<f32>(v.x), b[0], acc[i]);
  acc[i] = fma(vec4<f32>(v.y), b[1], acc[i]);
  acc[i] = fma(vec4<f32>(v.z), b[2], acc[i]);
  acc[i] = fma(vec4<f32>(v.w), b[3], acc[i]);
}

fn update(a: array<vec4<f32>, 4>, b: array<vec4<f32>, 4>) {
  rank4(0u, subgroupBroadcast(a[0], 0u), b);
  rank4(1u, subgroupBroadcast(a[1], 0u), b);
  rank4(2u, subgroupBroadcast(a[2], 0u), b);
  rank4(3u, subgroupBroadcast(a[3], 0u), b);
  rank4(4u, subgroupBroadcast(a[0], 1u), b);
  rank4(5u, subgroupBroadcast(a[1], 1u), b);
  rank4(6u, subgroupBroadcast(a[2], 1u), b);
  rank4(7u, subgroupBroadcast(a[3], 1u), b);
  rank4(8u, subgroupBroadcast(a[0], 2u), b);
  rank4(9u, subgroupBroadcast(a[1], 2u), b);
  rank4(10u, subgroupBroadcast(a[2], 2u), b);
  rank4(11u, subgroupBroadcast(a[3], 2u), b);
  rank4(12u, subgroupBroadcast(a[0], 3u), b);
  rank4(13u, subgroupBroadcast(a[1], 3u), b);
  rank4(14u, subgroupBroadcast(a[2], 3u), b);
  rank4(15u, subgroupBroadcast(a[3], 3u), b);
  rank4(16u, subgroupBroadcast(a[0], 4u), b);
  rank4(17u, subgroupBroadcast(a[1], 4u), b);
  rank4(18u, subgroupBroadcast(a[2], 4u), b);
  rank4(19u, subgroupBroadcast(a[3], 4u), b);
  rank4(20u, subgroupBroadcast(a[0], 5u), b);
  rank4(21u, subgroupBroadcast(a[1], 5u), b);
  rank4(22u, subgroupBroadcast(a[2], 5u), b);
  rank4(23u, subgroupBroadcast(a[3], 5u), b);
  rank4(24u, subgroupBroadcast(a[0], 6u), b);
  rank4(25u, subgroupBroadcast(a[1], 6u), b);
  rank4(26u, subgroupBroadcast(a[2], 6u), b);
  rank4(27u, subgroupBroadcast(a[3], 6u), b);
  rank4(28u, subgroupBroadcast(a[0], 7u), b);
  rank4(29u, subgroupBroadcast(a[1], 7u), b);
  rank4(30u, subgroupBroadcast(a[2], 7u), b);
  rank4(31u, subgroupBroadcast(a[3], 7u), b);
}

// m[j][c] → out[c][j]: four vec4s transposed.
fn transpose4(m: array<vec4<f32>, 4>) -> array<vec4<f32>, 4> {
  return array<vec4<f32>, 4>(
    vec4<f32>(m[0].x, m[1].x, m[2].x, m[3].x),
    vec4<f32>(m[0].y, m[1].y, m[2].y, m[3].y),
    vec4<f32>(m[0].z, m[1].z, m[2].z, m[3].z),
    vec4<f32>(m[0].w, m[1].w, m[2].w, m[3].w),
  );
}

// One problem's shape and where its batch matrix starts, in quads of elements.
struct Vec4Problem {
  M: u32,
  N: u32,
  K: u32,
  baseA: u32,
  baseB: u32,
  baseC: u32,
  alpha: f32,
  beta: f32,
}

// The TILE_M x TILE_N tile (tileX, tileY) of C = alpha · op(A) · op(B) + beta · C for problem `pr`.
fn subgroupVec4Tile(tileX: u32, tileY: u32, lane: u32, pr: Vec4Problem, transA: bool, transB: bool, second: bool) {
  let row0 = tileY * TILE_M;
  let quads = pr.N / 4u;
  let quad = min(tileX * WG_X + lane, quads - 1u); // this lane's column quad, clamped for loading
  let K4 = pr.K / 4u;
  let M4 = pr.M / 4u;

  for (var i = 0u; i < THREAD_M; i++) { acc[i] = vec4<f32>(0.0); }

  for (var k4 = 0u; k4 < K4; k4++) {
    var a: array<vec4<f32>, 4>;
    if (transA) {
      // A stored [K, M]: four k rows of this lane's four consecutive A rows.
      let q = min(row0 / 4u + lane, M4 - 1u);
      var t: array<vec4<f32>, 4>;
      for (var j = 0u; j < 4u; j++) { t[j] = loadA4(pr.baseA + (4u * k4 + j) * M4 + q); }
      a = transpose4(t);
    } else {
      for (var c = 0u; c < 4u; c++) { a[c] = loadA4(pr.baseA + min(row0 + 4u * lane + c, pr.M - 1u) * K4 + k4); }
    }
    var b: array<vec4<f32>, 4>;
    if (transB) {
      // B stored [N, K]: this lane's four columns, four k each.
      var t: array<vec4<f32>, 4>;
      for (var j = 0u; j < 4u; j++) { t[j] = loadB4(second, pr.baseB + (4u * quad + j) * K4 + k4); }
      b = transpose4(t);
    } else {
      for (var j = 0u; j < 4u; j++) { b[j] = loadB4(second, pr.baseB + (4u * k4 + j) * quads + quad); }
    }
    update(a, b);
  }

  let q = tileX * WG_X + lane;
  if (q >= quads) { return; }
  for (var i = 0u; i < THREAD_M; i++) {
    let row = row0 + i;
    if (row >= pr.M) { break; }
    let idx = pr.baseC + row * quads + q;
    var v = pr.alpha * acc[i];
    if (pr.beta != 0.0) { v += pr.beta * loadC4(second, idx); }
    storeC4(second, idx, row, q, v);
  }
}

// The two-problem kernels (matmul/subgroup-vec4-pair, -pair-swiglu): row r of the grid is problem 0's
// row tile floor(r·t0 / n) where that count steps at r, else problem 1's row tile r − floor(r·t0 / n),
// t0 and t1 the problems' row tiles and n = t0 + t1, so the two problems' rows spread evenly over the
// grid (each kernel's header says why). Problem 0 is A · B (input gradient), problem 1 Aᵀ · B (weight
// gradient), with the second B and C.
fn subgroupVec4PairTile(tileX: u32, gridRow: u32, lane: u32, p0: Vec4Problem, p1: Vec4Problem) {
  let t0 = (p0.M + TILE_M - 1u) / TILE_M;
  let n = t0 + (p1.M + TILE_M - 1u) / TILE_M;
  let before = (gridRow * t0) / n;
  if (((gridRow + 1u) * t0) / n > before) {
    subgroupVec4Tile(tileX, before, lane, p0, false, false, false);
  } else {
    subgroupVec4Tile(tileX, gridRow - before, lane, p1, true, false, true);
  }
}
