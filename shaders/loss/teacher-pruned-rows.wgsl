// loss/teacher-pruned-rows — loss/teacher-pruned in the `rows` layout (src/kernels/row-variant.ts) for
// adapters without subgroups: ROWS rows per workgroup, LANES lanes per row, a log2(LANES)-step tree.
// Contract, Params and numerics: include/teacher-pruned-row.wgsl (as loss/teacher-pruned).
// Bindings (group 0): 0 uniform Params, 1 read Z, 2 read LSE, 3 read TOK, 4 read t2d, 5 read lm, 6 read_write P, 7 read_write Q, 8 read_write PM.
// Dispatch: ceil(count / ROWS) workgroups of LANES x ROWS invocations, folded into (x, y)
//   (workgroup = wg.x + wg.y · num_workgroups.x); LANES and ROWS are LOSS_ROW_GEOMETRY.rows in
//   src/kernels/loss-rows.ts, appended as constants; the host's grid uses the same record.
// Numerics: row reductions by include/row-reduce-tree (fixed halving tree; deterministic).

#include "include/teacher-pruned-row.wgsl"
#include "include/row-reduce-tree.wgsl"
#include "include/loss-stats-lanes.wgsl"
