// rmsnorm/forward — y = w ⊙ x / sqrt(mean(x²) + eps) per row, saving 1/rms for the backward.
//
// Shapes: x f32 rows of `hidden` at row stride strideX (≥ hidden; padded rows allowed);
//   w f32 [hidden]; y f32 at row stride strideY (padding between rows is left untouched);
//   invRms f32 [rows] = 1 / sqrt(mean(x²) + eps), or in blocks of invBlockRows rows at a stride of
//   invBlockStride (several TTT steps' rows normed at once; include/rmsnorm-forward-x.wgsl).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        x
//   2 storage read        w
//   3 storage read_write  y
//   4 storage read_write  invRms
// Dispatch: one workgroup of 256 per row, rows folded into (x, y) (row = wg.y * nwg.x + wg.x).
// Numerics: statistics in f32: each invocation sums x² over columns lid, lid + 256, ... in
//   increasing order, then a fixed-shape tree reduction in workgroup memory (deterministic).
//   y = w * (x * invRms), the Hugging Face LlamaRMSNorm order.

// The row body, shared with rmsnorm/forward-rows and rmsnorm/forward-subgroup; this file is its
// `wide` layout (include/row-reduce-wide: 256 invocations, rowSum the halving tree above).
#include "include/rmsnorm-forward-x.wgsl"
#include "include/rmsnorm-forward-row.wgsl"
#include "include/row-reduce-wide.wgsl"
