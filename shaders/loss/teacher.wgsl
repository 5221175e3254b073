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

struct Params {
  count: u32,
  rowStart: u32,
  V: u32,
  D: u32,
  tPart: u32,
  lmPart: u32,
  pPart: u32,
  qPart: u32,
  tokPart: u32,
  pmPart: u32,
}

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read> T: array<f32>;
@group(0) @binding(2) var<storage, read> t2d: array<i32>;
@group(0) @binding(3) var<storage, read> used: array<i32>;
@group(0) @binding(4) var<storage, read> lm: array<i32>;
@group(0) @binding(5) var<storage, read_write> P: array<f32>;
@group(0) @binding(6) var<storage, read_write> Q: array<f32>;
@group(0) @binding(7) var<storage, read_write> TOK: array<i32>;
@group(0) @binding(8) var<storage, read_write> PM: array<i32>;

#include "include/loss-row-argmax.wgsl"

// Tree-combine the per-invocation (max, sum, argmax) partials; the result lands in slot 0.
fn reduceAll(lid: u32) {
  for (var step = WG / 2u; step > 0u; step = step >> 1u) {
    if (lid < step) {
      let m1 = redMax[lid];
      let m2 = redMax[lid + step];
      let m = max(m1, m2);
      redSum[lid] = redSum[lid] * exp(m1 - m) + redSum[lid + step] * exp(m2 - m);
      var idx = min(redIdx[lid], redIdx[lid + step]);
      if (m1 > m2) { idx = redIdx[lid]; } else if (m2 > m1) { idx = redIdx[lid + step]; }
      redMax[lid] = m;
      redIdx[lid] = idx;
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wg.x + wg.y * nwg.x;
  if (i >= u.count) { return; }
  let r = u.rowStart + i;
  let tBase = (r - u.tPart) * u.V;

  // Pass 1: full-vocab max, sum of exp and argmax.
  var m = LOWEST;
  var s = 0.0;
  var idx = NO_INDEX;
  for (var v = lid; v < u.V; v += WG) {
    let x = T[tBase + v];
    if (x > m) {
      s = s * exp(m - x) + 1.0;
      m = x;
      idx = v;
    } else {
      s += exp(x - m);
    }
  }
  redMax[lid] = m;
  redSum[lid] = s;
  redIdx[lid] = idx;
  workgroupBarrier();
  reduceAll(lid);
  let lse = redMax[0] + log(redSum[0]);
  let tok = redIdx[0];
  workgroupBarrier();

  // Pass 2: max and sum of exp over the gathered draft columns.
  var dm = LOWEST;
  var ds = 0.0;
  for (var d = lid; d < u.D; d += WG) {
    let x = T[tBase + u32(used[d])];
    if (x > dm) {
      ds = ds * exp(dm - x) + 1.0;
      dm = x;
    } else {
      ds += exp(x - dm);
    }
  }
  redMax[lid] = dm;
  redSum[lid] = ds;
  redIdx[lid] = NO_INDEX;
  workgroupBarrier();
  reduceAll(lid);
  let dMax = redMax[0];
  let dInv = 1.0 / redSum[0];

  // Pass 3: write p and p̃.
  let pBase = (r - u.pPart) * u.D;
  let qBase = (r - u.qPart) * u.D;
  for (var d = lid; d < u.D; d += WG) {
    let x = T[tBase + u32(used[d])];
    P[pBase + d] = exp(x - dMax) * dInv;
    Q[qBase + d] = exp(x - lse);
  }
  if (lid == 0u) {
    TOK[r - u.tokPart] = i32(tok);
    PM[r - u.pmPart] = select(0, lm[r - u.lmPart], t2d[tok] != 0);
  }
}
