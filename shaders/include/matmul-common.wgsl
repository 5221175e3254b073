// include/matmul-common — what every scalar-bound matmul variant shares: the Params block, the
// TRANS_A / TRANS_B overrides and binding 0 (include/matmul-params), and the four
// bindings (0 uniform Params, 1 read A, 2 read B, 3 read_write C). The contract itself is stated
// in matmul/tiled. Each variant's launch geometry (WG_X, WG_Y, THREAD_M, THREAD_N, TILE_M,
// TILE_N) is not declared here: it is MATMUL_GEOMETRY in src/kernels/matmul.ts, appended to every
// variant's source as constants. Included by matmul/{naive,tiled,tiled-f16,blocked,subgroup,gemv}
// (and through them by the *-f16w weight variants).
//
// B's element type is the constant B_F16 (0: f32 storage, 1: f16 storage), appended by the kernel
// module with the geometry. B is bound as 32-bit words either way so that one shader text serves
// both: f32 elements are bitcast back (exact, so the f32 variants compute bit for bit what they did
// with array<f32>), f16 elements are unpacked from the word holding their pair with the core
// builtin unpack2x16float, which needs no `shader-f16` feature (every adapter can store weights at
// half precision; arithmetic stays f32). Element i of an f16 B lives in the low half of word i / 2
// when i is even, the high half when odd (little-endian, as the host uploads raw f16 bits).

#include "include/matmul-params.wgsl"

@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<u32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;

// op(B) storage element i (an index into B's elements, not its words) as f32.
fn bAt(i: u32) -> f32 {
  if (B_F16 != 0u) { return unpack2x16float(B[i >> 1u])[i & 1u]; }
  return bitcast<f32>(B[i]);
}
