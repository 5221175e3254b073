// loss/target-stats-subgroup — loss/target-stats in the `subgroup` layout (src/kernels/row-variant.ts):
// one LANES-lane subgroup per workgroup reducing ROWS rows in turn, no barriers.
// Contract, Params and numerics: include/target-stats-row.wgsl (as loss/target-stats).
// Bindings (group 0): 0 uniform Params, 1 read T, 2 read_write LSE, 3 read_write TOK.
// Dispatch: ceil(count / ROWS) workgroups of LANES invocations (one subgroup; the host refuses the
//   variant when subgroups may be narrower), folded into (x, y); LANES and ROWS are
//   LOSS_ROW_GEOMETRY.subgroup in src/kernels/loss-rows.ts, appended as constants.
// Numerics: row reductions by include/row-reduce-subgroup (fixed xor butterfly; deterministic).
enable subgroups;

#include "include/target-stats-row.wgsl"
#include "include/row-reduce-subgroup.wgsl"
#include "include/loss-stats-lanes.wgsl"
