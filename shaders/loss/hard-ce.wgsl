// loss/hard-ce — hard-label cross-entropy fused with log-softmax, and its gradient (pretraining a
// target model); one row per workgroup.
//
// Row r = rowStart + i with label y = LAB[r]:
//   y < 0 (ignore, e.g. −100 or −1): rowLoss 0, gradient 0, logits not read.
//   0 ≤ y < V:  rowLoss = (lse(x[r]) − x[r, y]) · invDen
//               grad[r, v] = gradScale · invDen · (softmax(x[r])_v − 1[v == y])
//   y ≥ V (corrupt label): rowLoss = NaN, so the bad batch shows up in the loss instead of vanishing.
// invDen = 1 / max(CNT[cntIndex], 1) when USE_COUNT (the number of non-negative labels, counted on
// the GPU by loss/reduce just before), else the uniform invDen.
// Bindings (group 0):
//   0 uniform Params
//   1 read_write X   f32 [*, V] logits; overwritten by the gradient when GRAD_MODE = 1
//   2 read       LAB i32 [*]    part starts at labPart
//   3 read_write G   f32 [*, V] gradient when GRAD_MODE = 2 (else an unused placeholder)
//   4 read_write L   f32 [*]    rowLoss, part starts at lPart
//   5 read       CNT f32 [*]    label count at cntIndex (read only when USE_COUNT)
// override GRAD_MODE: 0 = loss only, 1 = in place into X, 2 = into G. override USE_COUNT: bool.
// Dispatch: count workgroups of 256 as (min(count, 65535), ceil(count / 65535)).
// Numerics: f32 online (max, Σexp) per invocation over V in strides of 256, fixed-order tree.

// The row body, shared with loss/hard-ce-rows and loss/hard-ce-subgroup; this file is its `wide` layout.
#include "include/hard-ce-row.wgsl"
#include "include/row-reduce-wide.wgsl"
#include "include/loss-stats-wide.wgsl"
