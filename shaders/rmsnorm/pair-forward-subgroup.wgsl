// rmsnorm/pair-forward-subgroup — rmsnorm/pair-forward in the `subgroup` layout
// (src/kernels/row-variant.ts): one LANES-lane subgroup per workgroup reducing ROWS segment rows in turn.
// Contract, shapes and bindings: rmsnorm/pair-forward.
// Dispatch: ceil(2·rows / ROWS) workgroups of LANES invocations (one subgroup; the host refuses the
//   variant when subgroups may be narrower), folded into (x, y); LANES and ROWS are
//   RMSNORM_ROW_GEOMETRY.subgroup in src/kernels/rmsnorm.ts, appended as constants.
// Numerics: the bits of rmsnorm/gather-forward-subgroup and rmsnorm/forward-subgroup
//   (include/row-reduce-subgroup).
enable subgroups;

#include "include/rmsnorm-pair-forward.wgsl"

fn processRow(i: u32, lane: u32, slot: u32) { processRowUniform(i, lane, slot); }

#include "include/row-reduce-subgroup.wgsl"
