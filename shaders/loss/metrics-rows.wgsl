// loss/metrics-rows — loss/metrics in the `rows` layout (src/kernels/row-variant.ts) for adapters
// without subgroups: ROWS rows per workgroup, LANES lanes per row, a log2(LANES)-step tree.
// Contract, Params, overrides and numerics: include/metrics-row.wgsl (as loss/metrics).
// Bindings (group 0): 0 uniform Params, 1 read Z, 2 read Q, 3 read TOK, 4 read LM, 5 read PM, 6 read used, 7 read_write O.
// Dispatch: ceil(count / ROWS) workgroups of LANES x ROWS invocations, folded into (x, y)
//   (workgroup = wg.x + wg.y · num_workgroups.x); LANES and ROWS are LOSS_ROW_GEOMETRY.rows in
//   src/kernels/loss-rows.ts, appended as constants; the host's grid uses the same record.
// Numerics: row reductions by include/row-reduce-tree (fixed halving tree; deterministic).

#include "include/metrics-row.wgsl"
#include "include/row-reduce-tree.wgsl"
#include "include/loss-stats-lanes.wgsl"
