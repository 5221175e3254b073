// attention/forward — flash-style causal attention with GQA, key padding and the EAGLE3 TTT
// "diagonal" keys (docs/eagle3.md §4). Plain causal attention is the step = 0 case.
//
// Shapes (row-major f32 unless noted; element offsets from each binding's start):
//   Q      [B, S, nH, hd]               (the [B·S, nH·hd] output of the q projection)
//   Kc, Vc [J, B, S, nKV, hd]  J ≥ step + 1; slot j holds K_j / V_j of TTT step j (RoPE applied)
//   mask   [B, S] i32                   1 = real token, 0 = padding
//   O      [B, S, nH, hd]
//   L      [B, nH, S]                   log-sum-exp of each query row's scores
// Query head h reads kv head h / (nH / nKV). Row t attends to step-0 keys u ≤ t with mask[u] = 1,
// plus K_j[t] of every step j = 1..step (never masked). Scores are q·k · scale.
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read mask,
//   5 read_write O, 6 read_write L.
// Dispatch: (ceil(S / BR), nH, B) workgroups of BR·TPR invocations. A workgroup owns BR query rows
// of one (b, h); invocation (r, l) = (index / TPR, index % TPR) owns row r and the head dims
// d ≡ l mod TPR. Step-0 keys stream through workgroup memory BC at a time (only up to the block's
// last row, so the S x S score matrix never exists); partial dot products over each invocation's
// dims are summed through workgroup memory in a fixed order, so the TPR invocations of a row agree
// exactly. BR, TPR, BC and MAX_HD are one FlashGeometry record of src/kernels/attention.ts
// (ATTENTION_GEOMETRIES, picked per head dim by chooseAttentionGeometry; TPR ∈ {1, 2, 4, 8}),
// appended to this source as constants; the host's grid and workgroup-memory check use the same
// record. BC sets the online-softmax grouping, so geometries with different BC differ in the last
// bits of O and L; each is deterministic.
// Numerics: f32 throughout, online softmax (running max m, running sum ℓ, rescaled accumulator).
// Blocked keys are excluded by a flag, never by an infinite score: a row with no allowed key
// (every step-0 key u ≤ t padded, only possible at step 0) writes O = 0 and L = 0, never NaN.
// HEAD_DIM ≤ MAX_HD (override constant, one pipeline per head size).

#include "include/attention-flash.wgsl"
@group(0) @binding(5) var<storage, read_write> O: array<f32>;
@group(0) @binding(6) var<storage, read_write> L: array<f32>;

const WG: u32 = BR * TPR;  // TPR invocations per query row
const NEG: f32 = -3.0e38; // "no score yet"; finite so that differences never make NaN
// The first BC invocations flag the keys of a tile.
const_assert WG >= BC;
// Row scores add the partials of the TPR invocations in one fixed pairwise order per TPR (the
// same trees as include/attention-partial-sums, which also needs DPs, so it is not included here).
const_assert TPR == 1u || TPR == 2u || TPR == 4u || TPR == 8u;

var<workgroup> Ks: array<f32, BC * MAX_HD>; // [BC][MAX_HD]
var<workgroup> Vs: array<f32, BC * MAX_HD>;
var<workgroup> Ps: array<f32, BR * BC * TPR>; // [BR][BC][TPR] partial dot products
var<workgroup> keyOk: array<u32, BC>;

#include "include/attention-kv-offset.wgsl"

fn sumP(i: u32) -> f32 {
  if (TPR == 1u) { return Ps[i]; }
  if (TPR == 2u) { return Ps[i] + Ps[i + 1u]; }
  if (TPR == 4u) { return (Ps[i] + Ps[i + 1u]) + (Ps[i + 2u] + Ps[i + 3u]); }
  return ((Ps[i] + Ps[i + 1u]) + (Ps[i + 2u] + Ps[i + 3u])) + ((Ps[i + 4u] + Ps[i + 5u]) + (Ps[i + 6u] + Ps[i + 7u]));
}

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
  let r = tid / TPR;
  let l = tid % TPR;
  let b = wg.z;
  let h = wg.y;
  let g = h / (p.heads / p.kvHeads);
  let t0 = wg.x * BR;
  let t = t0 + r;
  let rowOk = t < p.seq;
  let tc = min(t, p.seq - 1u); // clamped row for loads of out-of-range rows
  let qBase = ((b * p.seq + tc) * p.heads + h) * HEAD_DIM;

  var qv: array<f32, DPT>;
  var acc: array<f32, DPT>;
  for (var i = 0u; i < LANE_DIMS; i++) {
    let d = l + TPR * i;
    qv[i] = 0.0;
    acc[i] = 0.0;
    if (d < HEAD_DIM) { qv[i] = Q[qBase + d]; }
  }
  var m = NEG;
  var lsum = 0.0;

  // Step-0 keys 0 .. min(t0 + BR, S) − 1, in tiles of BC.
  let keyEnd = min(t0 + BR, p.seq);
  let tiles = (keyEnd + BC - 1u) / BC;
  for (var tile = 0u; tile < tiles; tile++) {
    let u0 = tile * BC;
    for (var e = tid; e < BC * HEAD_DIM; e += WG) {
      let c = e / HEAD_DIM;
      let d = e % HEAD_DIM;
      let u = u0 + c;
      var kx = 0.0;
      var vx = 0.0;
      if (u < p.seq) {
        let o = kvOffset(0u, b, u, g) + d;
        kx = Kc[o];
        vx = Vc[o];
      }
      Ks[c * MAX_HD + d] = kx;
      Vs[c * MAX_HD + d] = vx;
    }
    if (tid < BC) {
      let u = u0 + tid;
      var ok = 0u;
      if (u < p.seq) { ok = select(0u, 1u, mask[b * p.seq + u] != 0i); }
      keyOk[tid] = ok;
    }
    workgroupBarrier();
    for (var c = 0u; c < BC; c++) {
      var s = 0.0;
      for (var i = 0u; i < LANE_DIMS; i++) {
        let d = l + TPR * i;
        if (d >= HEAD_DIM) { continue; }
        s = fma(qv[i], Ks[c * MAX_HD + d], s);
      }
      Ps[(r * BC + c) * TPR + l] = s;
    }
    workgroupBarrier();
    var sc: array<f32, BC>;
    var allowed: array<bool, BC>;
    var tileMax = NEG;
    for (var c = 0u; c < BC; c++) {
      let s = sumP((r * BC + c) * TPR) * p.scale;
      let ok = keyOk[c] == 1u && u0 + c <= t;
      allowed[c] = ok;
      sc[c] = s;
      if (ok) { tileMax = max(tileMax, s); }
    }
    let mNew = max(m, tileMax);
    let alpha = exp(m - mNew);
    var pc: array<f32, BC>;
    var psum = 0.0;
    for (var c = 0u; c < BC; c++) {
      pc[c] = select(0.0, exp(min(sc[c] - mNew, 0.0)), allowed[c]);
      psum += pc[c];
    }
    lsum = lsum * alpha + psum;
    for (var i = 0u; i < LANE_DIMS; i++) {
      let d = l + TPR * i;
      if (d >= HEAD_DIM) { continue; }
      var a = acc[i] * alpha;
      for (var c = 0u; c < BC; c++) { a = fma(pc[c], Vs[c * MAX_HD + d], a); }
      acc[i] = a;
    }
    m = mNew;
    workgroupBarrier();
  }

  // Diagonal keys K_j[t], j = 1..step: one per step, specific to the row, read from global memory.
  for (var j = 1u; j <= p.step; j++) {
    let kb = kvOffset(j, b, tc, g);
    var s = 0.0;
    for (var i = 0u; i < LANE_DIMS; i++) {
      let d = l + TPR * i;
      if (d >= HEAD_DIM) { continue; }
      s = fma(qv[i], Kc[kb + d], s);
    }
    Ps[r * TPR + l] = s;
    workgroupBarrier();
    let sj = sumP(r * TPR) * p.scale;
    workgroupBarrier();
    let mNew = max(m, sj);
    let alpha = exp(m - mNew);
    let pj = exp(sj - mNew);
    lsum = lsum * alpha + pj;
    for (var i = 0u; i < LANE_DIMS; i++) {
      let d = l + TPR * i;
      if (d >= HEAD_DIM) { continue; }
      acc[i] = fma(pj, Vc[kb + d], acc[i] * alpha);
    }
    m = mNew;
  }

  if (!rowOk) { return; }
  let empty = lsum == 0.0;
  let inv = select(1.0 / max(lsum, 1e-30), 0.0, empty);
  for (var i = 0u; i < LANE_DIMS; i++) {
    let d = l + TPR * i;
    if (d >= HEAD_DIM) { continue; }
    O[qBase + d] = acc[i] * inv;
  }
  if (l == 0u) {
    L[(b * p.heads + h) * p.seq + t] = select(m + log(max(lsum, 1e-30)), 0.0, empty);
  }
}
