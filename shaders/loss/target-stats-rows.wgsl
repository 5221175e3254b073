// loss/target-stats-rows — loss/target-stats in the `rows` layout (src/kernels/row-variant.ts) for
// adapters without subgroups: ROWS rows per workgroup, LANES lanes per row, a log2(LANES)-step tree.
// Contract, Params and numerics: include/target-stats-row.wgsl (as loss/target-stats).
// Bindings (group 0): 0 uniform Params, 1 read T, 2 read_write LSE, 3 read_write TOK.
// Dispatch: ceil(count / ROWS) workgroups of LANES x ROWS invocations, folded into (x, y)
//   (workgroup = wg.x + wg.y · num_workgroups.x); LANES and ROWS are LOSS_ROW_GEOMETRY.rows in
//   src/kernels/loss-rows.ts, appended as constants; the host's grid uses the same record.
// Numerics: row reductions by include/row-reduce-tree (fixed halving tree; deterministic).

#include "include/target-stats-row.wgsl"
#include "include/row-reduce-tree.wgsl"
#include "include/loss-stats-lanes.wgsl"
