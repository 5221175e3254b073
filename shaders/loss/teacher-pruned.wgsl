// loss/teacher-pruned — the EAGLE3 teacher from compact features (the target's logits of the draft
// vocabulary, the full-vocabulary logsumexp and argmax), one row per workgroup.
// Contract and numerics: include/teacher-pruned-row.wgsl.
// Bindings (group 0):
//   0 uniform Params
//   1 read       Z    f32 [*, D]  the target's draft-vocabulary logits; part starts at global row zPart
//   2 read       LSE  f32 [*]     full-vocabulary logsumexp, part starts at lsePart
//   3 read       TOK  i32 [*]     full-vocabulary argmax (a target id), part starts at tokPart
//   4 read       t2d  i32 [V]     0/1
//   5 read       lm   i32 [*]     loss mask, part starts at lmPart
//   6 read_write P    f32 [*, D]  part starts at pPart
//   7 read_write Q    f32 [*, D]  p̃, part starts at qPart
//   8 read_write PM   i32 [*]     part starts at pmPart
// Dispatch: count workgroups of 256, laid out as (min(count, 65535), ceil(count / 65535)); the
// workgroup index is wg.x + wg.y · num_workgroups.x.

#include "include/teacher-pruned-row.wgsl"
#include "include/row-reduce-wide.wgsl"
#include "include/loss-stats-wide.wgsl"
