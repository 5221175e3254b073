// attention/dkv — backward pass for dK/dV of the causal / TTT-diagonal attention (forward.wgsl).
//
// For kv head g and key row u, with P = exp(s − L) recomputed from the saved log-sum-exp,
// dp = dO·v, D = rowsum(dO ⊙ O), dS = P ⊙ (dp − D), summing over the query heads h of group g:
//   step-0 keys:   dK_0[u] = scale · Σ_h Σ_{t ≥ u} dS[h,t,u] q[h,t],  dV_0[u] = Σ_h Σ_{t ≥ u} P[h,t,u] dO[h,t]
//                  (zero for padded keys, mask[u] = 0)
//   diagonal keys: dK_j[u] = scale · Σ_h dS_j[h,u] q[h,u],           dV_j[u] = Σ_h P_j[h,u] dO[h,u], j = 1..step
// Shapes (f32 unless noted): Q, dO [B, S, nH, hd]; Kc, Vc, dKc, dVc [J, B, S, nKV, hd] (J ≥ step + 1);
//   mask [B, S] i32; rowStats [B, nH, S, 2] = (L, D) from attention/prep.
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read mask, 5 read dO,
//   6 read rowStats, 7 read_write dKc, 8 read_write dVc. Writes slots 0..step of dKc/dVc
//   (Params.accumulate != 0 adds to what is there); other slots are untouched.
// Dispatch: (ceil(S / BK), nKV, B) workgroups of BK·TPR invocations. A workgroup owns BK key rows
// of one (b, g); invocation (c, l) = (index / TPR, index % TPR) owns key row c and head dims
// d ≡ l mod TPR. For each query head of the group in increasing order, query rows t ≥ first key
// stream through workgroup memory BQ at a time: one workgroup sums every contribution in a fixed
// order, so the result is deterministic without atomics. BK, TPR, BQ and MAX_HD are
// one FlashGeometry record of src/kernels/attention.ts (ATTENTION_GEOMETRIES, picked per head dim
// by chooseAttentionGeometry; TPR ∈ {1, 2, 4, 8}), appended to this source as constants; the host's
// grid and workgroup-memory check use the same record.
// Numerics: f32; partial dot products summed in a fixed order. HEAD_DIM ≤ MAX_HD (override).

#include "include/attention-flash.wgsl"
@group(0) @binding(5) var<storage, read> dO: array<f32>;
@group(0) @binding(6) var<storage, read> rowStats: array<f32>;
@group(0) @binding(7) var<storage, read_write> dKc: array<f32>;
@group(0) @binding(8) var<storage, read_write> dVc: array<f32>;

const WG: u32 = BK * TPR; // TPR invocations per key row
// The first BQ invocations load the row statistics of a tile.
const_assert WG >= BQ;

var<workgroup> Qs: array<f32, BQ * MAX_HD>;  // [BQ][MAX_HD]
var<workgroup> Gs: array<f32, BQ * MAX_HD>;  // [BQ][MAX_HD] dO rows
var<workgroup> Ps: array<f32, BK * BQ * TPR>;  // [BK][BQ][TPR] partial k·q
var<workgroup> DPs: array<f32, BK * BQ * TPR>; // [BK][BQ][TPR] partial v·dO
var<workgroup> rowL: array<f32, BQ>;
var<workgroup> rowD: array<f32, BQ>;

#include "include/attention-kv-offset.wgsl"

#include "include/attention-partial-sums.wgsl"

// Store one invocation's dims of a dK / dV row (scaled), overwriting or accumulating.
fn storeRow(base: u32, l: u32, dk: ptr<function, array<f32, DPT>>, dv: ptr<function, array<f32, DPT>>) {
  for (var i = 0u; i < LANE_DIMS; i++) {
    let d = l + TPR * i;
    if (d >= HEAD_DIM) { continue; }
    var k = (*dk)[i] * p.scale;
    var v = (*dv)[i];
    if (p.accumulate != 0u) {
      k += dKc[base + d];
      v += dVc[base + d];
    }
    dKc[base + d] = k;
    dVc[base + d] = v;
  }
}

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
  let c = tid / TPR;
  let l = tid % TPR;
  let b = wg.z;
  let g = wg.y;
  let groupSize = p.heads / p.kvHeads;
  let u0 = wg.x * BK;
  let u = u0 + c;
  let uc = min(u, p.seq - 1u);
  let keyValid = u < p.seq && mask[b * p.seq + uc] != 0i;

  var kv: array<f32, DPT>;
  var vv: array<f32, DPT>;
  var dk: array<f32, DPT>;
  var dv: array<f32, DPT>;
  let kb0 = kvOffset(0u, b, uc, g);
  for (var i = 0u; i < LANE_DIMS; i++) {
    let d = l + TPR * i;
    kv[i] = 0.0;
    vv[i] = 0.0;
    dk[i] = 0.0;
    dv[i] = 0.0;
    if (d < HEAD_DIM) {
      kv[i] = Kc[kb0 + d];
      vv[i] = Vc[kb0 + d];
    }
  }

  // Step-0 keys: query rows u0 .. S − 1 of every head in the group.
  let tiles = (p.seq - min(u0, p.seq) + BQ - 1u) / BQ;
  for (var hh = 0u; hh < groupSize; hh++) {
    let h = g * groupSize + hh;
    for (var tile = 0u; tile < tiles; tile++) {
      let tq0 = u0 + tile * BQ;
      for (var e = tid; e < BQ * HEAD_DIM; e += WG) {
        let rr = e / HEAD_DIM;
        let d = e % HEAD_DIM;
        let t = tq0 + rr;
        var qx = 0.0;
        var gx = 0.0;
        if (t < p.seq) {
          let o = ((b * p.seq + t) * p.heads + h) * HEAD_DIM + d;
          qx = Q[o];
          gx = dO[o];
        }
        Qs[rr * MAX_HD + d] = qx;
        Gs[rr * MAX_HD + d] = gx;
      }
      if (tid < BQ) {
        let t = min(tq0 + tid, p.seq - 1u);
        let si = 2u * ((b * p.heads + h) * p.seq + t);
        rowL[tid] = rowStats[si];
        rowD[tid] = rowStats[si + 1u];
      }
      workgroupBarrier();
      for (var rr = 0u; rr < BQ; rr++) {
        var s = 0.0;
        var dp = 0.0;
        for (var i = 0u; i < LANE_DIMS; i++) {
          let d = l + TPR * i;
          if (d >= HEAD_DIM) { continue; }
          s = fma(kv[i], Qs[rr * MAX_HD + d], s);
          dp = fma(vv[i], Gs[rr * MAX_HD + d], dp);
        }
        Ps[(c * BQ + rr) * TPR + l] = s;
        DPs[(c * BQ + rr) * TPR + l] = dp;
      }
      workgroupBarrier();
      var pr: array<f32, BQ>;
      var ds: array<f32, BQ>;
      for (var rr = 0u; rr < BQ; rr++) {
        let t = tq0 + rr;
        let ok = keyValid && t >= u && t < p.seq;
        let pi = (c * BQ + rr) * TPR;
        let s = sumP(pi) * p.scale;
        // The select before exp keeps blocked entries from ever producing inf.
        pr[rr] = select(0.0, exp(select(-100.0, s - rowL[rr], ok)), ok);
        ds[rr] = pr[rr] * (sumDP(pi) - rowD[rr]);
      }
      for (var i = 0u; i < LANE_DIMS; i++) {
        let d = l + TPR * i;
        if (d >= HEAD_DIM) { continue; }
        var a = dk[i];
        var w = dv[i];
        for (var rr = 0u; rr < BQ; rr++) {
          a = fma(ds[rr], Qs[rr * MAX_HD + d], a);
          w = fma(pr[rr], Gs[rr * MAX_HD + d], w);
        }
        dk[i] = a;
        dv[i] = w;
      }
      workgroupBarrier();
    }
  }
  if (u < p.seq) { storeRow(kb0, l, &dk, &dv); }

  // Diagonal keys K_j[u], j = 1..step: only query row t = u of each head sees them.
  for (var j = 1u; j <= p.step; j++) {
    let kb = kvOffset(j, b, uc, g);
    for (var i = 0u; i < LANE_DIMS; i++) {
      let d = l + TPR * i;
      kv[i] = 0.0;
      vv[i] = 0.0;
      dk[i] = 0.0;
      dv[i] = 0.0;
      if (d < HEAD_DIM) {
        kv[i] = Kc[kb + d];
        vv[i] = Vc[kb + d];
      }
    }
    for (var hh = 0u; hh < groupSize; hh++) {
      let h = g * groupSize + hh;
      let qBase = ((b * p.seq + uc) * p.heads + h) * HEAD_DIM;
      var s = 0.0;
      var dp = 0.0;
      for (var i = 0u; i < LANE_DIMS; i++) {
        let d = l + TPR * i;
        if (d >= HEAD_DIM) { continue; }
        s = fma(kv[i], Q[qBase + d], s);
        dp = fma(vv[i], dO[qBase + d], dp);
      }
      Ps[c * TPR + l] = s;
      DPs[c * TPR + l] = dp;
      workgroupBarrier();
      let sj = sumP(c * TPR) * p.scale;
      let dpj = sumDP(c * TPR);
      workgroupBarrier();
      let si = 2u * ((b * p.heads + h) * p.seq + uc);
      let pj = exp(sj - rowStats[si]);
      let dsj = pj * (dpj - rowStats[si + 1u]);
      for (var i = 0u; i < LANE_DIMS; i++) {
        let d = l + TPR * i;
        if (d >= HEAD_DIM) { continue; }
        dk[i] = fma(dsj, Q[qBase + d], dk[i]);
        dv[i] = fma(pj, dO[qBase + d], dv[i]);
      }
    }
    if (u < p.seq) { storeRow(kb, l, &dk, &dv); }
  }
}
