// rmsnorm/gather-forward-subgroup — rmsnorm/gather-forward in the `subgroup` layout
// (src/kernels/row-variant.ts): one LANES-lane subgroup per workgroup reducing ROWS rows in turn.
// Contract, shapes and bindings: rmsnorm/gather-forward.
// Dispatch: ceil(rows / ROWS) workgroups of LANES invocations (one subgroup; the host refuses the
//   variant when subgroups may be narrower), folded into (x, y); LANES and ROWS are
//   RMSNORM_ROW_GEOMETRY.subgroup in src/kernels/rmsnorm.ts, appended as constants.
// Numerics: the bits of embedding/gather followed by rmsnorm/forward-subgroup (include/row-reduce-subgroup).
enable subgroups;

#include "include/rmsnorm-gather-forward-x.wgsl"
#include "include/rmsnorm-forward-row.wgsl"
#include "include/row-reduce-subgroup.wgsl"
