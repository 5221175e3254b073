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

struct Params {
  count: u32,
  rowStart: u32,
  V: u32,
  xPart: u32,
  labPart: u32,
  gPart: u32,
  lPart: u32,
  cntIndex: u32,
  gradScale: f32,
  invDen: f32,
}

override GRAD_MODE: u32 = 0u;
override USE_COUNT: bool = false;

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read> LAB: array<i32>;
@group(0) @binding(3) var<storage, read_write> G: array<f32>;
@group(0) @binding(4) var<storage, read_write> L: array<f32>;
@group(0) @binding(5) var<storage, read> CNT: array<f32>;

#include "include/loss-row-softmax.wgsl"

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wg.x + wg.y * nwg.x;
  if (i >= u.count) { return; }
  let r = u.rowStart + i;
  let y = LAB[r - u.labPart];
  let valid = y >= 0 && u32(y) < u.V;
  let n = select(0u, u.V, valid);
  let xBase = (r - u.xPart) * u.V;
  var invDen = u.invDen;
  if (USE_COUNT) { invDen = 1.0 / max(CNT[u.cntIndex], 1.0); }

  var m = LOWEST;
  var s = 0.0;
  for (var v = lid; v < n; v += WG) {
    let x = X[xBase + v];
    if (x > m) {
      s = s * exp(m - x) + 1.0;
      m = x;
    } else {
      s += exp(x - m);
    }
  }
  redMax[lid] = m;
  redSum[lid] = s;
  workgroupBarrier();
  for (var step = WG / 2u; step > 0u; step = step >> 1u) {
    if (lid < step) {
      let m1 = redMax[lid];
      let m2 = redMax[lid + step];
      let mm = max(m1, m2);
      redSum[lid] = redSum[lid] * exp(m1 - mm) + redSum[lid + step] * exp(m2 - mm);
      redMax[lid] = mm;
    }
    workgroupBarrier();
  }
  let lse = redMax[0] + log(redSum[0]);
  // Every invocation reads x[y] before any invocation may overwrite it in place.
  var xy = 0.0;
  if (valid) { xy = X[xBase + u32(y)]; }
  workgroupBarrier();

  let g = u.gradScale * invDen;
  if (GRAD_MODE != 0u) {
    for (var v = lid; v < u.V; v += WG) {
      var grad = 0.0;
      if (valid) {
        grad = g * (exp(X[xBase + v] - lse) - select(0.0, 1.0, v == u32(y)));
      }
      if (GRAD_MODE == 1u) { X[xBase + v] = grad; }
      if (GRAD_MODE == 2u) { G[(r - u.gPart) * u.V + v] = grad; }
    }
  }
  if (lid == 0u) {
    var loss = 0.0;
    if (valid) { loss = (lse - xy) * invDen; }
    if (y >= 0 && !valid) {
      // A quiet-NaN bit pattern built from a runtime value (a constant NaN is a shader-creation error).
      loss = bitcast<f32>(0x7fc00000u + (u.count - u.count));
    }
    L[r - u.lPart] = loss;
  }
}
