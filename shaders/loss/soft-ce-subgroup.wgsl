// loss/soft-ce-subgroup — loss/soft-ce in the `subgroup` layout (src/kernels/row-variant.ts): one
// LANES-lane subgroup per workgroup reducing ROWS rows in turn, no barriers.
// Contract, Params, overrides and numerics: include/soft-ce-row.wgsl (as loss/soft-ce).
// Bindings (group 0): 0 uniform Params, 1 read_write Z, 2 read P, 3 read M, 4 read_write G, 5 read_write L.
// Dispatch: ceil(count / ROWS) workgroups of LANES invocations (one subgroup; the host refuses the
//   variant when subgroups may be narrower), folded into (x, y); LANES and ROWS are
//   LOSS_ROW_GEOMETRY.subgroup in src/kernels/loss-rows.ts, appended as constants.
// Numerics: row reductions by include/row-reduce-subgroup (fixed xor butterfly; bit-identical to
//   the `rows` variant at equal LANES; deterministic).
enable subgroups;

#include "include/soft-ce-row.wgsl"
#include "include/row-reduce-subgroup.wgsl"
#include "include/loss-stats-lanes.wgsl"
