// matmul/gemv-f16w — matmul/gemv with the weight B stored as f16: the same shader text, compiled
// with B_F16 = 1 by src/kernels/matmul.ts (MATMUL_F16W_KERNELS), so its geometry is
// MATMUL_GEOMETRY.gemv and its bindings, shapes and dispatch are exactly matmul/gemv's.
// Bindings (group 0): 0 uniform Params, 1 read A (f32), 2 read B (f16 pairs packed in u32 words,
// element i in word i / 2, low half first; K and the batch stride must be even), 3 read_write C.
// Dispatch: as matmul/gemv: (ceil(N / TILE_N), 1, batch).
// Numerics: each word yields one (k, k + 1) weight pair, widened exactly to f32 by unpack2x16float
// (core WGSL, no shader-f16 feature); the arithmetic is matmul/gemv's f32, so the result equals
// matmul/gemv run on the f16-rounded weights.

#include "matmul/gemv.wgsl"
