// loss/teacher-rows — loss/teacher in the `rows` layout (src/kernels/row-variant.ts) for adapters
// without subgroups: ROWS rows per workgroup, LANES lanes per row, a log2(LANES)-step tree.
// Contract, Params, overrides and numerics: include/teacher-row.wgsl (as loss/teacher).
// Bindings (group 0): 0 uniform Params, 1 read T, 2 read t2d, 3 read used, 4 read lm, 5 read_write P, 6 read_write Q, 7 read_write TOK, 8 read_write PM.
// Dispatch: ceil(count / ROWS) workgroups of LANES x ROWS invocations, folded into (x, y)
//   (workgroup = wg.x + wg.y · num_workgroups.x); LANES and ROWS are LOSS_ROW_GEOMETRY.rows in
//   src/kernels/loss-rows.ts, appended as constants; the host's grid uses the same record.
// Numerics: row reductions by include/row-reduce-tree (fixed halving tree; deterministic).

#include "include/teacher-row.wgsl"
#include "include/row-reduce-tree.wgsl"
#include "include/loss-stats-lanes.wgsl"
