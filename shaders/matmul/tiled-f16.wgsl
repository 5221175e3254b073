// matmul/tiled-f16 — matmul/tiled with f16 operands: A and B are rounded to f16 as they are staged
// in workgroup memory (half the bytes and bandwidth of the f32 tiles), products are formed and
// accumulated in f32. Needs the `shader-f16` feature; never chosen by default (training wants f32
// operands), only on request.
//
// Computes, for every batch b:  C_b = alpha * op(A_b) · op(B_b) + beta * C_b
//   op(A) is M x K: A stored row-major [M, K], or [K, M] when TRANS_A (A^T given).
//   op(B) is K x N: B stored row-major [K, N], or [N, K] when TRANS_B.
//   C is row-major [M, N]; A, B and C are f32 buffers.
// Bindings (group 0):
//   0 uniform Params (dynamic offset into the uniform arena)
//   1 storage read        A  (batch b starts at b * strideA elements; strideA = 0 broadcasts)
//   2 storage read        B  (b * strideB)
//   3 storage read_write  C  (b * strideC)
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), batch) workgroups of WG_X x WG_Y invocations.
// Each workgroup computes a TILE_M x TILE_N tile of C; each invocation a THREAD_M x THREAD_N block
// (rows ly + WG_Y·i, columns lx + WG_X·j). K advances in slabs of SLAB staged in workgroup memory
// (TILE_M·SLAB + TILE_N·SLAB f16). The geometry is MATMUL_GEOMETRY.'tiled-f16' in
// src/kernels/matmul.ts, appended to this source as constants; the host's grid uses the same record.
// Numerics: operands rounded to f16 (relative error <= 2^-11 each, values beyond 65504 overflow),
// f32 products accumulated in f32 in increasing k order; out-of-range elements load as 0, so M, N,
// K need not be multiples of the tile. beta == 0 never reads C (C may hold NaN garbage).
enable f16;

#include "include/matmul-common.wgsl"

// The element type of the staged tiles (include/matmul-tile): f16, so staging rounds each operand.
alias TILE_T = f16;

#include "include/matmul-tile.wgsl"
