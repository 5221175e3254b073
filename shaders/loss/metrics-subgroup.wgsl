// loss/metrics-subgroup — loss/metrics in the `subgroup` layout (src/kernels/row-variant.ts): one
// LANES-lane subgroup per workgroup reducing ROWS rows in turn, no barriers.
// Contract, Params, overrides and numerics: include/metrics-row.wgsl (as loss/metrics).
// Bindings (group 0): 0 uniform Params, 1 read Z, 2 read Q, 3 read TOK, 4 read LM, 5 read PM, 6 read used, 7 read_write O.
// Dispatch: ceil(count / ROWS) workgroups of LANES invocations (one subgroup; the host refuses the
//   variant when subgroups may be narrower), folded into (x, y); LANES and ROWS are
//   LOSS_ROW_GEOMETRY.subgroup in src/kernels/loss-rows.ts, appended as constants.
// Numerics: row reductions by include/row-reduce-subgroup (fixed xor butterfly; bit-identical to
//   the `rows` variant at equal LANES; deterministic).
enable subgroups;

#include "include/metrics-row.wgsl"
#include "include/row-reduce-subgroup.wgsl"
#include "include/loss-stats-lanes.wgsl"
