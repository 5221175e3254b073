// embedding/gather-f16 — embedding/gather from an f16 table: the same shader text, compiled with
// TABLE_F16 = 1 by src/kernels/embedding.ts (the frozen target's embedding under f16 weights).
// Shapes: ids i32 [N]; table f16 [V, H] (pairs packed in u32 words, element i in word i / 2, low
//   half first), possibly split into row parts; out f32 [N, H].
// Bindings (group 0): 0 uniform Params, 1 read ids, 2 read table part, 3 read_write out.
// Dispatch: as embedding/gather: ceil(N * H / WG) workgroups of WG, one invocation per output.
// Numerics: each element widened exactly to f32 by unpack2x16float; exact.

#include "embedding/gather.wgsl"
