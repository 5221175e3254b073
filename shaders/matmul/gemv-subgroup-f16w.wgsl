// matmul/gemv-subgroup-f16w — matmul/gemv-subgroup with the weight B stored as f16: the same shader
// text, compiled with B_F16 = 1 by src/kernels/matmul.ts (MATMUL_F16W_KERNELS), so its geometry is
// MATMUL_GEOMETRY['gemv-subgroup'] and its bindings, shapes and dispatch are exactly matmul/gemv-subgroup's.
// Bindings (group 0): 0 uniform Params, 1 read A (vec4 f32), 2 read B (vec4 of u32 words, eight f16
// weights each; K and the batch stride must be multiples of 8), 3 read_write C.
// Dispatch: as matmul/gemv-subgroup: (ceil(N / TILE_N), 1, batch) single-subgroup workgroups.
// Numerics: each word yields one (k, k + 1) weight pair, widened exactly to f32 by unpack2x16float;
// the arithmetic is matmul/gemv-subgroup's f32, so the result equals matmul/gemv-subgroup run on the
// f16-rounded weights.

#include "matmul/gemv-subgroup.wgsl"
