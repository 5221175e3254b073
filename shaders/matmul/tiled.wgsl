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

// The element type of the staged tiles (include/matmul-tile): f32, so staging is exact.
alias TILE_T = f32;

#include "include/matmul-tile.wgsl"
