// include/matmul-params — the uniform every matmul kernel reads, filled the same way for all of them
// by src/kernels/matmul.ts (M, N, K, the three batch strides in elements, alpha, beta), the TRANS_A /
// TRANS_B layout overrides the host sets on every matmul pipeline, and binding 0. Included by
// include/matmul-common (the variants that bind A, B, C as scalars) and by the vec4 variants
// matmul/{subgroup-vec4,subgroup-vec4-f16w,gemv-vec4}, which bind them as vec4 arrays themselves.

struct Params {
  M: u32,
  N: u32,
  K: u32,
  strideA: u32,
  strideB: u32,
  strideC: u32,
  alpha: f32,
  beta: f32,
}

override TRANS_A: bool = false;
override TRANS_B: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
