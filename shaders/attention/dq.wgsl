// attention/dq — backward pass for dQ of the causal / TTT-diagonal attention (see forward.wgsl).
//
// Recomputes P = exp(s − L) from the saved log-sum-exp; with dp = dO·v and D = rowsum(dO ⊙ O),
// dS = P ⊙ (dp − D) and dQ[t] = scale · Σ_keys dS · k, over step-0 keys u ≤ t (mask[u] = 1) and
// the diagonal keys K_j[t], j = 1..step.
// Shapes (f32 unless noted): Q, dO, dQ [B, S, nH, hd]; Kc, Vc [J, B, S, nKV, hd] (J ≥ step + 1);
//   mask [B, S] i32; rowStats [B, nH, S, 2] = (L, D) from attention/prep.
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read mask, 5 read dO,
//   6 read rowStats, 7 read_write dQ.
// Dispatch: (ceil(S / BR), nH, B) workgroups of BR·TPR invocations, the forward's geometry: BR
// query rows per workgroup, invocation (r, l) owns row r and head dims d ≡ l mod TPR; step-0 keys
// stream through workgroup memory BC at a time up to the block's last row. BR, TPR, BC and MAX_HD
// are one FlashGeometry record of src/kernels/attention.ts (ATTENTION_GEOMETRIES, picked per head
// dim by chooseAttentionGeometry; TPR ∈ {1, 2, 4, 8}), appended to this source as constants; the
// host's grid and workgroup-memory check use the same record.
// Numerics: f32; partial dot products summed in a fixed order. Blocked keys are excluded by a flag,
// so a row with no allowed key (L = 0 placeholder) gets dQ = 0. HEAD_DIM ≤ MAX_HD (override).

#include "include/attention-flash.wgsl"
@group(0) @binding(5) var<storage, read> dO: array<f32>;
@group(0) @binding(6) var<storage, read> rowStats: array<f32>;
@group(0) @binding(7) var<storage, read_write> dQ: array<f32>;

const WG: u32 = BR * TPR; // TPR invocations per query row
// The first BC invocations flag the keys of a tile.
const_assert WG >= BC;

var<workgroup> Ks: array<f32, BC * MAX_HD>; // [BC][MAX_HD]
var<workgroup> Vs: array<f32, BC * MAX_HD>;
var<workgroup> Ps: array<f32, BR * BC * TPR>;  // [BR][BC][TPR] partial q·k
var<workgroup> DPs: array<f32, BR * BC * TPR>; // [BR][BC][TPR] partial dO·v
var<workgroup> keyOk: array<u32, BC>;

#include "include/attention-kv-offset.wgsl"

#include "include/attention-partial-sums.wgsl"

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
  let r = tid / TPR;
  let l = tid % TPR;
  let b = wg.z;
  let h = wg.y;
  let g = h / (p.heads / p.kvHeads);
  let t0 = wg.x * BR;
  let t = t0 + r;
  let tc = min(t, p.seq - 1u);
  let qBase = ((b * p.seq + tc) * p.heads + h) * HEAD_DIM;
  let si = 2u * ((b * p.heads + h) * p.seq + tc);
  let Lr = rowStats[si];
  let Dr = rowStats[si + 1u];

  var qv: array<f32, DPT>;
  var gv: array<f32, DPT>; // dO slice
  var acc: array<f32, DPT>;
  for (var i = 0u; i < LANE_DIMS; i++) {
    let d = l + TPR * i;
    qv[i] = 0.0;
    gv[i] = 0.0;
    acc[i] = 0.0;
    if (d < HEAD_DIM) {
      qv[i] = Q[qBase + d];
      gv[i] = dO[qBase + d];
    }
  }

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
      var dp = 0.0;
      for (var i = 0u; i < LANE_DIMS; i++) {
        let d = l + TPR * i;
        if (d >= HEAD_DIM) { continue; }
        s = fma(qv[i], Ks[c * MAX_HD + d], s);
        dp = fma(gv[i], Vs[c * MAX_HD + d], dp);
      }
      Ps[(r * BC + c) * TPR + l] = s;
      DPs[(r * BC + c) * TPR + l] = dp;
    }
    workgroupBarrier();
    var ds: array<f32, BC>;
    for (var c = 0u; c < BC; c++) {
      let pi = (r * BC + c) * TPR;
      let ok = keyOk[c] == 1u && u0 + c <= t;
      let s = sumP(pi) * p.scale;
      // The select before exp keeps blocked entries from ever producing inf.
      let pr = select(0.0, exp(select(-100.0, s - Lr, ok)), ok);
      ds[c] = pr * (sumDP(pi) - Dr);
    }
    for (var i = 0u; i < LANE_DIMS; i++) {
      let d = l + TPR * i;
      if (d >= HEAD_DIM) { continue; }
      var a = acc[i];
      for (var c = 0u; c < BC; c++) { a = fma(ds[c], Ks[c * MAX_HD + d], a); }
      acc[i] = a;
    }
    workgroupBarrier();
  }

  // Diagonal keys K_j[t], j = 1..step (never masked).
  for (var j = 1u; j <= p.step; j++) {
    let kb = kvOffset(j, b, tc, g);
    var s = 0.0;
    var dp = 0.0;
    for (var i = 0u; i < LANE_DIMS; i++) {
      let d = l + TPR * i;
      if (d >= HEAD_DIM) { continue; }
      s = fma(qv[i], Kc[kb + d], s);
      dp = fma(gv[i], Vc[kb + d], dp);
    }
    Ps[r * TPR + l] = s;
    DPs[r * TPR + l] = dp;
    workgroupBarrier();
    let sj = sumP(r * TPR) * p.scale;
    let dpj = sumDP(r * TPR);
    workgroupBarrier();
    let dsj = exp(sj - Lr) * (dpj - Dr);
    for (var i = 0u; i < LANE_DIMS; i++) {
      let d = l + TPR * i;
      if (d >= HEAD_DIM) { continue; }
      acc[i] = fma(dsj, Kc[kb + d], acc[i]);
    }
  }

  if (t >= p.seq) { return; }
  for (var i = 0u; i < LANE_DIMS; i++) {
    let d = l + TPR * i;
    if (d >= HEAD_DIM) { continue; }
    dQ[qBase + d] = acc[i] * p.scale;
  }
}
