// loss/target-stats — per row of the target's full-vocabulary logits, its logsumexp and argmax (the
// position statistics compact features carry instead of the logits), one row per workgroup.
// Contract and numerics: include/target-stats-row.wgsl.
// Bindings (group 0):
//   0 uniform Params
//   1 read       T    f32 [*, V]  bound part starts at global row tPart
//   2 read_write LSE  f32 [*]     part starts at lsePart
//   3 read_write TOK  i32 [*]     part starts at tokPart
// Dispatch: count workgroups of 256, laid out as (min(count, 65535), ceil(count / 65535)); the
// workgroup index is wg.x + wg.y · num_workgroups.x.

#include "include/target-stats-row.wgsl"
#include "include/row-reduce-wide.wgsl"
#include "include/loss-stats-wide.wgsl"
