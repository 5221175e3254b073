// loss/hard-ce-rows — loss/hard-ce in the `rows` layout (src/kernels/row-variant.ts) for adapters
// without subgroups: ROWS rows per workgroup, LANES lanes per row, a log2(LANES)-step tree.
// Contract, Params, overrides and numerics: include/hard-ce-row.wgsl (as loss/hard-ce).
// Bindings (group 0): 0 uniform Params, 1 read_write X, 2 read LAB, 3 read_write G, 4 read_write L, 5 read CNT.
// Dispatch: ceil(count / ROWS) workgroups of LANES x ROWS invocations, folded into (x, y)
//   (workgroup = wg.x + wg.y · num_workgroups.x); LANES and ROWS are LOSS_ROW_GEOMETRY.rows in
//   src/kernels/loss-rows.ts, appended as constants; the host's grid uses the same record.
// Numerics: row reductions by include/row-reduce-tree (fixed halving tree; deterministic).

#include "include/hard-ce-row.wgsl"
#include "include/row-reduce-tree.wgsl"
#include "include/loss-stats-lanes.wgsl"
