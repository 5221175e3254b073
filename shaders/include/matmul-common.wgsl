// include/matmul-common — what every matmul variant shares: the Params block (filled the same way
// for all variants by src/kernels/matmul.ts), the TRANS_A / TRANS_B layout overrides and the four
// bindings (0 uniform Params, 1 read A, 2 read B, 3 read_write C). The contract itself is stated
// in matmul/tiled. Each variant's launch geometry (WG_X, WG_Y, THREAD_M, THREAD_N, TILE_M,
// TILE_N) is not declared here: it is MATMUL_GEOMETRY in src/kernels/matmul.ts, appended to every
// variant's source as constants. Included by matmul/{naive,tiled,tiled_f16,blocked,subgroup}.

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
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;
