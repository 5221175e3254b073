// loss/soft-ce — EAGLE3 soft-target cross-entropy fused with log-softmax, and its gradient
// (docs/eagle3.md §6), for TTT step k; one row per workgroup.
//
// Row r = rowStart + i = b·S + t. The TTT shift is a parameter: the row reads teacher row r + k
// when t + k < S (same sequence), else the pad row. A pad row's mask is 0 (zero fill), so its
// p (1/D) never enters the loss or the gradient and is not materialised. With m = shifted mask:
//   CE[r]        = −Σ_v p[v] · log_softmax(z[r])_v
//   rowLoss[r]   = m · CE[r]                                   (the caller's reduction divides by B·S)
//   grad[r, v]   = m · gradScale · (Σp · softmax(z[r])_v − p[v])   (= m·scale·(softmax − p) as Σp = 1)
// gradScale (the step's gradScales entry) already holds weight / (B·S). Rows with m = 0 write loss 0
// and gradient 0 and never read z, so garbage there cannot leak in. One dispatch may hold up to 16
// TTT steps' rows stacked (stepRows rows each; include/soft-ce-row.wgsl).
// Bindings (group 0):
//   0 uniform Params
//   1 read_write Z  f32 [*, D] logits; overwritten by the gradient when GRAD_MODE = 1 (in place)
//   2 read       P  f32 [*, D] step-0 teacher p (unshifted), part starts at pPart
//   3 read       M  i32 [*]    step-0 position mask (unshifted), part starts at mPart
//   4 read_write G  f32 [*, D] gradient when GRAD_MODE = 2 (else an unused placeholder)
//   5 read_write L  f32 [*]    rowLoss, part starts at lPart; step s's rows from s·lStride
// override GRAD_MODE: 0 = loss only, 1 = gradient into Z, 2 = gradient into G.
// Dispatch: count workgroups of 256 as (min(count, 65535), ceil(count / 65535)).
// Numerics: f32; pass 1 keeps an online (max, Σexp) per invocation and Σp, combined by a
// fixed-order tree; pass 2 accumulates p·(lse − z) (no cancellation between two large sums) and
// writes the gradient. Deterministic.

// The row body, shared with loss/soft-ce-rows and loss/soft-ce-subgroup; this file is its `wide` layout.
#include "include/soft-ce-row.wgsl"
#include "include/row-reduce-wide.wgsl"
#include "include/loss-stats-wide.wgsl"
