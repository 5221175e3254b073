// loss/teacher — EAGLE3 teacher from full-vocab target logits (docs/eagle3.md §5), one row per workgroup.
//
// For every row r of the segment (global row r = rowStart + i, i < count):
//   tok[r]  = argmax_v T[r, v]                      (ties → lowest id)
//   pm[r]   = lossMask[r] if t2d[tok[r]] != 0 else 0 (position mask)
//   p[r, d] = softmax_d T[r, used[d]]              (renormalised over the D draft columns)
//   q[r, d] = exp(T[r, used[d]] − logsumexp_v T[r, v])   (p̃: target mass, NOT renormalised)
// Bindings (group 0):
//   0 uniform Params
//   1 read       T     f32 [*, V]  bound part starts at global row tPart
//   2 read       t2d   i32 [V]     0/1
//   3 read       used  i32 [D]     draft → target ids (d2t + arange(D)), each in [0, V)
//   4 read       lm    i32 [*]     loss mask, part starts at lmPart
//   5 read_write p     f32 [*, D]  part starts at pPart
//   6 read_write q     f32 [*, D]  p̃, part starts at qPart
//   7 read_write tok   i32 [*]     part starts at tokPart
//   8 read_write pm    i32 [*]     part starts at pmPart
// Dispatch: count workgroups of 256, laid out as (min(count, 65535), ceil(count / 65535)); the
// workgroup index is wg.x + wg.y · num_workgroups.x.
// Numerics: f32 throughout. The pass over V keeps, per invocation, a running max and a sum of
// exp(x − max) rescaled when the max grows (online softmax), then a fixed-order tree combines the
// 256 partials — so V is processed in chunks of 256 columns with a max-subtracted sum, any V works
// and the result is deterministic. The draft columns get their own max so p stays finite even when
// every draft token is far below the full-vocab max.

// The row body, shared with loss/teacher-rows and loss/teacher-subgroup; this file is its `wide` layout.
#include "include/teacher-row.wgsl"
#include "include/row-reduce-wide.wgsl"
#include "include/loss-stats-wide.wgsl"
