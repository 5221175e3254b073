// loss/teacher-pruned-subgroup — loss/teacher-pruned in the `subgroup` layout (src/kernels/row-variant.ts):
// one LANES-lane subgroup per workgroup reducing ROWS rows in turn, no barriers.
// Contract, Params and numerics: include/teacher-pruned-row.wgsl (as loss/teacher-pruned).
// Bindings (group 0): 0 uniform Params, 1 read Z, 2 read LSE, 3 read TOK, 4 read t2d, 5 read lm, 6 read_write P, 7 read_write Q, 8 read_write PM.
// Dispatch: ceil(count / ROWS) workgroups of LANES invocations (one subgroup; the host refuses the
//   variant when subgroups may be narrower), folded into (x, y); LANES and ROWS are
//   LOSS_ROW_GEOMETRY.subgroup in src/kernels/loss-rows.ts, appended as constants.
// Numerics: row reductions by include/row-reduce-subgroup (fixed xor butterfly; deterministic).
enable subgroups;

#include "include/teacher-pruned-row.wgsl"
#include "include/row-reduce-subgroup.wgsl"
#include "include/loss-stats-lanes.wgsl"
