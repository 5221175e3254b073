// matmul/blocked-f16w — matmul/blocked with B (the weight) stored as f16: the same shader text, compiled
// with B_F16 = 1 by src/kernels/matmul.ts (MATMUL_F16W_KERNELS), so its geometry is
// MATMUL_GEOMETRY.blocked and its bindings, shapes and dispatch are exactly matmul/blocked's.
// Bindings (group 0): 0 uniform Params, 1 read A (f32), 2 read B (f16 pairs packed in u32 words,
// element i in word i / 2, low half first), 3 read_write C (f32).
// Dispatch: as matmul/blocked: (ceil(N / TILE_N), ceil(M / TILE_M), batch).
// Numerics: each B element is widened exactly to f32 by unpack2x16float (core WGSL, no shader-f16
// feature needed); the products and sums are matmul/blocked's f32 arithmetic, so the result equals
// matmul/blocked run on the f16-rounded weights. A and C stay f32.

#include "matmul/blocked.wgsl"
