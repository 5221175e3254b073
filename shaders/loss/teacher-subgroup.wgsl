// loss/teacher-subgroup — loss/teacher in the `subgroup` layout (src/kernels/row-variant.ts): one
// LANES-lane subgroup per workgroup reducing ROWS rows in turn, no barriers.
// Contract, Params, overrides and numerics: include/teacher-row.wgsl (as loss/teacher).
// Bindings (group 0): 0 uniform Params, 1 read T, 2 read t2d, 3 read used, 4 read lm, 5 read_write P, 6 read_write Q, 7 read_write TOK, 8 read_write PM.
// Dispatch: ceil(count / ROWS) workgroups of LANES invocations (one subgroup; the host refuses the
//   variant when subgroups may be narrower), folded into (x, y); LANES and ROWS are
//   LOSS_ROW_GEOMETRY.subgroup in src/kernels/loss-rows.ts, appended as constants.
// Numerics: row reductions by include/row-reduce-subgroup (fixed xor butterfly; bit-identical to
//   the `rows` variant at equal LANES; deterministic).
enable subgroups;

#include "include/teacher-row.wgsl"
#include "include/row-reduce-subgroup.wgsl"
#include "include/loss-stats-lanes.wgsl"
