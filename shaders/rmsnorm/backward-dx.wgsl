// rmsnorm/backward-dx — input gradient of y = w ⊙ x · r, r = 1 / sqrt(mean(x²) + eps):
//   dx = r · (dy ⊙ w) − x · (r³ / hidden) · Σ_j dy_j w_j x_j       (per row)
//
// Shapes: x at row stride strideX, dy at strideDy, dx at strideDx (each ≥ hidden); w f32 [hidden];
//   invRms f32 [rows] as saved by rmsnorm/forward.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        x
//   2 storage read        w
//   3 storage read        dy
//   4 storage read        invRms
//   5 storage read_write  dx
// Override ACCUMULATE: false writes dx, true adds into it (residual-branch gradients).
// Dispatch: one workgroup of 256 per row, folded into (x, y) like rmsnorm/forward.
// Numerics: the row dot product is accumulated in f32 per invocation (increasing columns) and
//   reduced by a fixed tree (deterministic).

// The row body, shared with rmsnorm/backward-dx-rows and rmsnorm/backward-dx-subgroup; this file is its
// `wide` layout (include/row-reduce-wide: 256 invocations, rowSum the halving tree above).
#include "include/rmsnorm-backward-dx-params.wgsl"
#include "include/rmsnorm-backward-dx-row.wgsl"
#include "include/row-reduce-wide.wgsl"
