// include/matmul-subgroup-vec4 — the body of matmul/subgroup-vec4 and matmul/subgroup-vec4-f16w (their
// contract, shapes, bindings, dispatch and numerics are stated in matmul/subgroup-vec4): the unrolled
// rank-4 updates, the vec4 loads of A in either layout, and the store. The including shader declares,
// after include/matmul-params and before including this file, A and C as array<vec4<f32>> and
//   fn loadB4(q: u32) -> vec4<f32>;   B's elements 4q .. 4q+3 (an index in quads of elements),
// which reads one vec4<f32> (f32 weights) or one vec2<u32> of four f16 (f16 weights).

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

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  let row0 = wg.y * TILE_M;
  let quads = p.N / 4u;
  let quad = min(wg.x * WG_X + lane, quads - 1u); // this lane's column quad, clamped for loading
  let K4 = p.K / 4u;
  let M4 = p.M / 4u;
  let baseA = wg.z * (p.strideA / 4u);
  let baseB = wg.z * (p.strideB / 4u);

  for (var i = 0u; i < THREAD_M; i++) { acc[i] = vec4<f32>(0.0); }

  for (var k4 = 0u; k4 < K4; k4++) {
    var a: array<vec4<f32>, 4>;
    if (TRANS_A) {
      // A stored [K, M]: four k rows of this lane's four consecutive A rows.
      let q = min(row0 / 4u + lane, M4 - 1u);
      var t: array<vec4<f32>, 4>;
      for (var j = 0u; j < 4u; j++) { t[j] = A[baseA + (4u * k4 + j) * M4 + q]; }
      a = transpose4(t);
    } else {
      for (var c = 0u; c < 4u; c++) { a[c] = A[baseA + min(row0 + 4u * lane + c, p.M - 1u) * K4 + k4]; }
    }
    var b: array<vec4<f32>, 4>;
    if (TRANS_B) {
      // B stored [N, K]: this lane's four columns, four k each.
      var t: array<vec4<f32>, 4>;
      for (var j = 0u; j < 4u; j++) { t[j] = loadB4(baseB + (4u * quad + j) * K4 + k4); }
      b = transpose4(t);
    } else {
      for (var j = 0u; j < 4u; j++) { b[j] = loadB4(baseB + (4u * k4 + j) * quads + quad); }
    }
    update(a, b);
  }

  let q = wg.x * WG_X + lane;
  if (q >= quads) { return; }
  let baseC = wg.z * (p.strideC / 4u);
  for (var i = 0u; i < THREAD_M; i++) {
    let row = row0 + i;
    if (row >= p.M) { break; }
    let idx = baseC + row * quads + q;
    var v = p.alpha * acc[i];
    if (p.beta != 0.0) { v += p.beta * C[idx]; }
    C[idx] = v;
  }
}
