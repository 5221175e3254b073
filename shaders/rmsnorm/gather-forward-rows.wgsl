// rmsnorm/gather-forward-rows — rmsnorm/gather-forward in the `rows` layout (src/kernels/row-variant.ts)
// for adapters without subgroups: ROWS rows per workgroup, LANES lanes per row, a log2(LANES)-step tree.
// Contract, shapes and bindings: rmsnorm/gather-forward.
// Dispatch: ceil(rows / ROWS) workgroups of LANES x ROWS invocations, folded into (x, y); LANES and
//   ROWS are RMSNORM_ROW_GEOMETRY.rows in src/kernels/rmsnorm.ts, appended as constants.
// Numerics: the bits of embedding/gather followed by rmsnorm/forward-rows (include/row-reduce-tree).

#include "include/rmsnorm-gather-forward-x.wgsl"
#include "include/rmsnorm-forward-row.wgsl"
#include "include/row-reduce-tree.wgsl"
