// loss/soft-ce — EAGLE3 soft-target cross-entropy fused with log-softmax, and its gradient
// (docs/eagle3.md §6), for TTT step k; one row per workgroup.
//
// Row r = rowStart + i = b·S + t. The TTT shift is a parameter: the row reads teacher row r + k
// when t + k < S (same sequence), else the pad row. A pad row's mask is 0 (zero fill), so its
// p (1/D) never enters the loss or the gradient and is not materialised. With m = shifted mask:
//   CE[r]        = −Σ_v p[v] · log_softmax(z[r])_v
//   rowLoss[r]   = m · CE[r]                                   (the caller's reduction divides by B·S)
//   grad[r, v]   = m · gradScale · (Σp · softmax(z[r])_v − p[v])   (= m·scale·(softmax − p) as Σp = 1)
// gradScale already holds weight / (B·S). Rows with m = 0 write loss 0 and gradient 0 and never
// read z, so garbage there cannot leak in.
// Bindings (group 0):
//   0 uniform Params
//   1 read_write Z  f32 [*, D] logits; overwritten by the gradient when GRAD_MODE = 1 (in place)
//   2 read       P  f32 [*, D] step-0 teacher p (unshifted), part starts at pPart
//   3 read       M  i32 [*]    step-0 position mask (unshifted), part starts at mPart
//   4 read_write G  f32 [*, D] gradient when GRAD_MODE = 2 (else an unused placeholder)
//   5 read_write L  f32 [*]    rowLoss, part starts at lPart
// override GRAD_MODE: 0 = loss only, 1 = gradient into Z, 2 = gradient into G.
// Dispatch: count workgroups of 256 as (min(count, 65535), ceil(count / 65535)).
// Numerics: f32; pass 1 keeps an online (max, Σexp) per invocation and Σp, combined by a
// fixed-order tree; pass 2 accumulates p·(lse − z) (no cancellation between two large sums) and
// writes the gradient. Deterministic.

struct Params {
  count: u32,
  rowStart: u32,
  D: u32,
  S: u32,
  k: u32,
  zPart: u32,
  pPart: u32,
  mPart: u32,
  gPart: u32,
  lPart: u32,
  gradScale: f32,
}

override GRAD_MODE: u32 = 0u;

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read_write> Z: array<f32>;
@group(0) @binding(2) var<storage, read> P: array<f32>;
@group(0) @binding(3) var<storage, read> M: array<i32>;
@group(0) @binding(4) var<storage, read_write> G: array<f32>;
@group(0) @binding(5) var<storage, read_write> L: array<f32>;

#include "include/loss-row-softmax.wgsl"
var<workgroup> redP: array<f32, 256>;

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wg.x + wg.y * nwg.x;
  if (i >= u.count) { return; }
  let r = u.rowStart + i;
  let inSeq = (r % u.S) + u.k < u.S;
  var mask = 0;
  if (inSeq) { mask = M[r + u.k - u.mPart]; }
  let n = select(0u, u.D, mask != 0);
  let zBase = (r - u.zPart) * u.D;
  let pBase = (r + u.k - u.pPart) * u.D;

  // Pass 1: max and Σexp of z, and Σp.
  var m = LOWEST;
  var s = 0.0;
  var sp = 0.0;
  for (var v = lid; v < n; v += WG) {
    let x = Z[zBase + v];
    if (x > m) {
      s = s * exp(m - x) + 1.0;
      m = x;
    } else {
      s += exp(x - m);
    }
    sp += P[pBase + v];
  }
  redMax[lid] = m;
  redSum[lid] = s;
  redP[lid] = sp;
  workgroupBarrier();
  for (var step = WG / 2u; step > 0u; step = step >> 1u) {
    if (lid < step) {
      let m1 = redMax[lid];
      let m2 = redMax[lid + step];
      let mm = max(m1, m2);
      redSum[lid] = redSum[lid] * exp(m1 - mm) + redSum[lid + step] * exp(m2 - mm);
      redMax[lid] = mm;
      redP[lid] = redP[lid] + redP[lid + step];
    }
    workgroupBarrier();
  }
  let lse = redMax[0] + log(redSum[0]);
  let pSum = redP[0];
  workgroupBarrier();

  // Pass 2: CE partials and the gradient (zeros for masked rows).
  let g = f32(mask) * u.gradScale;
  var ce = 0.0;
  for (var v = lid; v < u.D; v += WG) {
    var grad = 0.0;
    if (v < n) {
      let x = Z[zBase + v];
      let pv = P[pBase + v];
      ce += pv * (lse - x);
      grad = g * (pSum * exp(x - lse) - pv);
    }
    if (GRAD_MODE == 1u) { Z[zBase + v] = grad; }
    if (GRAD_MODE == 2u) { G[(r - u.gPart) * u.D + v] = grad; }
  }
  redP[lid] = ce;
  workgroupBarrier();
  for (var step = WG / 2u; step > 0u; step = step >> 1u) {
    if (lid < step) { redP[lid] = redP[lid] + redP[lid + step]; }
    workgroupBarrier();
  }
  if (lid == 0u) { L[r - u.lPart] = f32(mask) * redP[0]; }
}
