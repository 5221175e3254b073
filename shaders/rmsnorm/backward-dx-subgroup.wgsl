// rmsnorm/backward-dx-subgroup — rmsnorm/backward-dx in the `subgroup` layout (src/kernels/row-variant.ts):
// one LANES-lane subgroup per workgroup reducing ROWS rows in turn, no barriers.
// Contract, shapes and numerics: include/rmsnorm-backward-dx-row.wgsl (as rmsnorm/backward-dx).
// Bindings (group 0): 0 uniform Params, 1 read x, 2 read w, 3 read dy, 4 read invRms, 5 read_write dx.
// Dispatch: ceil(rows / ROWS) workgroups of LANES invocations (one subgroup; the host refuses the
//   variant when subgroups may be narrower), folded into (x, y); LANES and ROWS are
//   RMSNORM_ROW_GEOMETRY.subgroup in src/kernels/rmsnorm.ts, appended as constants.
// Numerics: row sums by include/row-reduce-subgroup (fixed xor butterfly; bit-identical to the
//   `rows` variant at equal LANES; deterministic).
enable subgroups;

#include "include/rmsnorm-backward-dx-params.wgsl"
#include "include/rmsnorm-backward-dx-row.wgsl"
#include "include/row-reduce-subgroup.wgsl"
