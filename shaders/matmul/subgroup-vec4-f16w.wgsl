// matmul/subgroup-vec4-f16w — matmul/subgroup-vec4 with B (the weight) stored as f16: the frozen target's
// projections at M > 1 (prefill, capture). Geometry MATMUL_GEOMETRY['subgroup-vec4'], and the
// contract, shapes, dispatch, edges and K order of matmul/subgroup-vec4 (the shared body is
// include/matmul-subgroup-vec4); the only change is how four B elements are read.
// Bindings (group 0): 0 uniform Params, 1 read A (array<vec4<f32>>), 2 read B (array<vec2<u32>>: four
// f16 per load, element i in the low half of word i / 2 when i is even), 3 read_write C
// (array<vec4<f32>>).
// What vec4 access needs: as matmul/subgroup-vec4 (K, N and the batch strides multiples of 4, M too
// when TRANS_A), so every quad of B elements is one aligned vec2 of words.
// Numerics: each B element is widened exactly to f32 by unpack2x16float (core WGSL, no shader-f16
// needed); the products and sums are matmul/subgroup-vec4's f32 arithmetic, so the result is
// matmul/subgroup-vec4's (and matmul/subgroup-f16w's) on the f16-rounded weights, bit for bit.
enable subgroups;

#include "include/matmul-params.wgsl"

@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<f32>>;

fn loadB4(second: bool, q: u32) -> vec4<f32> {
  let w = B[q];
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

#include "include/matmul-subgroup-vec4-one.wgsl"
