// rmsnorm/backward-dx-rows — rmsnorm/backward-dx in the `rows` layout (src/kernels/row-variant.ts) for
// adapters without subgroups: ROWS rows per workgroup, LANES lanes per row, a log2(LANES)-step tree.
// Contract, shapes and numerics: include/rmsnorm-backward-dx-row.wgsl (as rmsnorm/backward-dx).
// Bindings (group 0): 0 uniform Params, 1 read x, 2 read w, 3 read dy, 4 read invRms, 5 read_write dx.
// Dispatch: ceil(rows / ROWS) workgroups of LANES x ROWS invocations, folded into (x, y)
//   (workgroup = wg.x + wg.y · num_workgroups.x); LANES and ROWS are RMSNORM_ROW_GEOMETRY.rows
//   in src/kernels/rmsnorm.ts, appended as constants; the host's grid uses the same record.
// Numerics: row sums by include/row-reduce-tree (fixed halving tree; deterministic).

#include "include/rmsnorm-backward-dx-params.wgsl"
#include "include/rmsnorm-backward-dx-row.wgsl"
#include "include/row-reduce-tree.wgsl"
