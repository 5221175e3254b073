// loss/metrics — per-row EAGLE3 metric terms for TTT step k (docs/eagle3.md §6); one row per
// workgroup. Sums come later from loss/reduce (counts before ratios, never a mean of means).
//
// Row r = rowStart + i = b·S + t reads the step-0 teacher at row r + k when t + k < S, else the pad
// (tok 0, p̃ 0, masks 0 — zero fill within each sequence). With ℓ = shifted loss mask and
// m = shifted position mask, it writes O[r] = (c, ℓ, m·α, m) where
//   c = ℓ if used[argmax_v z[r, v]] == tok (argmax ties → lowest draft id), else 0
//   α = Σ_v min(p̃[v], softmax(z[r])_v)
// Bindings (group 0):
//   0 uniform Params
//   1 read       Z    f32 [*, D] draft logits of step k, part starts at zPart
//   2 read       Q    f32 [*, D] step-0 p̃, part starts at qPart
//   3 read       TOK  i32 [*]    step-0 argmax target ids, part starts at tokPart
//   4 read       LM   i32 [*]    step-0 loss mask, part starts at lmPart
//   5 read       PM   i32 [*]    step-0 position mask, part starts at pmPart
//   6 read       used i32 [D]    draft → target ids
//   7 read_write O    f32 [*, 4] part starts at oPart; step s's rows from s·oStride
// One dispatch may hold several TTT steps' rows stacked (stepRows rows each; include/metrics-row.wgsl).
// Dispatch: count workgroups of 256 as (min(count, 65535), ceil(count / 65535)).
// Numerics: f32 online (max, Σexp, argmax) per invocation, fixed-order tree; rows with ℓ = m = 0
// skip the passes. Deterministic.

// The row body, shared with loss/metrics-rows and loss/metrics-subgroup; this file is its `wide` layout.
#include "include/metrics-row.wgsl"
#include "include/row-reduce-wide.wgsl"
#include "include/loss-stats-wide.wgsl"
