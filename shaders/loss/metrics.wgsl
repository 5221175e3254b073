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
//   7 read_write O    f32 [*, 4] part starts at oPart
// Dispatch: count workgroups of 256 as (min(count, 65535), ceil(count / 65535)).
// Numerics: f32 online (max, Σexp, argmax) per invocation, fixed-order tree; rows with ℓ = m = 0
// skip the passes. Deterministic.

struct Params {
  count: u32,
  rowStart: u32,
  D: u32,
  S: u32,
  k: u32,
  zPart: u32,
  qPart: u32,
  tokPart: u32,
  lmPart: u32,
  pmPart: u32,
  oPart: u32,
}

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read> Z: array<f32>;
@group(0) @binding(2) var<storage, read> Q: array<f32>;
@group(0) @binding(3) var<storage, read> TOK: array<i32>;
@group(0) @binding(4) var<storage, read> LM: array<i32>;
@group(0) @binding(5) var<storage, read> PM: array<i32>;
@group(0) @binding(6) var<storage, read> used: array<i32>;
@group(0) @binding(7) var<storage, read_write> O: array<f32>;

#include "include/loss-row-argmax.wgsl"

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wg.x + wg.y * nwg.x;
  if (i >= u.count) { return; }
  let r = u.rowStart + i;
  let inSeq = (r % u.S) + u.k < u.S;
  let rs = r + u.k;
  var lm = 0;
  var pm = 0;
  var tok = 0;
  if (inSeq) {
    lm = LM[rs - u.lmPart];
    pm = PM[rs - u.pmPart];
    tok = TOK[rs - u.tokPart];
  }
  let n = select(0u, u.D, lm != 0 || pm != 0);
  let zBase = (r - u.zPart) * u.D;

  // Pass 1: max, Σexp and argmax of z.
  var m = LOWEST;
  var s = 0.0;
  var idx = NO_INDEX;
  for (var v = lid; v < n; v += WG) {
    let x = Z[zBase + v];
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
  for (var step = WG / 2u; step > 0u; step = step >> 1u) {
    if (lid < step) {
      let m1 = redMax[lid];
      let m2 = redMax[lid + step];
      let mm = max(m1, m2);
      redSum[lid] = redSum[lid] * exp(m1 - mm) + redSum[lid + step] * exp(m2 - mm);
      var id = min(redIdx[lid], redIdx[lid + step]);
      if (m1 > m2) { id = redIdx[lid]; } else if (m2 > m1) { id = redIdx[lid + step]; }
      redMax[lid] = mm;
      redIdx[lid] = id;
    }
    workgroupBarrier();
  }
  let zMax = redMax[0];
  let zInv = 1.0 / redSum[0];
  let pred = redIdx[0];
  workgroupBarrier();

  // Pass 2: α = Σ min(p̃, softmax(z)), only where the position mask counts it.
  let n2 = select(0u, u.D, pm != 0);
  let qBase = (rs - u.qPart) * u.D;
  var a = 0.0;
  for (var v = lid; v < n2; v += WG) {
    a += min(Q[qBase + v], exp(Z[zBase + v] - zMax) * zInv);
  }
  redSum[lid] = a;
  workgroupBarrier();
  for (var step = WG / 2u; step > 0u; step = step >> 1u) {
    if (lid < step) { redSum[lid] = redSum[lid] + redSum[lid + step]; }
    workgroupBarrier();
  }
  if (lid == 0u) {
    var hit = 0.0;
    if (n != 0u && used[pred] == tok) { hit = f32(lm); }
    let o = (r - u.oPart) * 4u;
    O[o] = hit;
    O[o + 1u] = f32(lm);
    O[o + 2u] = f32(pm) * redSum[0];
    O[o + 3u] = f32(pm);
  }
}
