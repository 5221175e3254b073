// attention/dkv-lanes — attention/dkv's contract (dK / dV of the causal / TTT-diagonal attention;
// same shapes, bindings 0..8, Params and accumulate flag) in attention/forward-lanes' layout: one
// subgroup of 8 lanes per workgroup, lane c owns key row wg.x·8 + c of kv head wg.y whole (k, v
// and the dK / dV accumulators in registers), every query and dO row loaded once per workgroup,
// split across the lanes (include/attention-lanes), no workgroup memory, no barriers.
//
//   step-0 keys:   dK_0[u] = scale · Σ_h Σ_{t ≥ u} dS[h,t,u] q[h,t],  dV_0[u] = Σ_h Σ_{t ≥ u} P[h,t,u] dO[h,t]
//                  (zero for padded keys, mask[u] = 0)
//   diagonal keys: dK_j[u] = scale · Σ_h dS_j[h,u] q[h,u],           dV_j[u] = Σ_h P_j[h,u] dO[h,u], j = 1..step
// with P = exp(s − L), dS = P ⊙ (dO·v − D) and (L, D) from attention/prep (rowStats). The query
// heads h of the group are summed in increasing order inside the workgroup: no atomics.
// Shapes (f32 unless noted): Q, dO [B, S, nH, hd]; Kc, Vc, dKc, dVc [J, B, S, nKV, hd] (J ≥ step + 1);
//   mask [B, S] i32; rowStats [B, nH, S, 2] = (L, D).
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read mask, 5 read dO,
//   6 read rowStats, 7 read_write dKc, 8 read_write dVc.
// Dispatch: (ceil(S / BK), nKV, B) workgroups of BK = 8 invocations. Writes slots 0..step of
// dKc / dVc (Params.accumulate != 0 adds to what is there); other slots are untouched.
// Numerics: f32, fma in increasing d, query order (h, t) increasing; attention/dkv sums its dot
// products in another order, so the two differ in the last bits. Deterministic. HEAD_DIM ≤ MAX_HD.

#include "include/attention-lanes.wgsl"
@group(0) @binding(5) var<storage, read> dO: array<f32>;
@group(0) @binding(6) var<storage, read> rowStats: array<f32>;
@group(0) @binding(7) var<storage, read_write> dKc: array<f32>;
@group(0) @binding(8) var<storage, read_write> dVc: array<f32>;

const_assert BK == 8u;

#include "include/attention-kv-offset.wgsl"

// Store a lane's dK / dV row (dK scaled), overwriting or accumulating.
fn storeRow(base: u32, dk: ptr<function, array<f32, MAX_HD>>, dv: ptr<function, array<f32, MAX_HD>>) {
  for (var d = 0u; d < HEAD_DIM; d++) {
    var k = (*dk)[d] * p.scale;
    var v = (*dv)[d];
    if (p.accumulate != 0u) {
      k += dKc[base + d];
      v += dVc[base + d];
    }
    dKc[base + d] = k;
    dVc[base + d] = v;
  }
}

@compute @workgroup_size(BK, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  let b = wg.z;
  let g = wg.y;
  let groupSize = p.heads / p.kvHeads;
  let u0 = wg.x * BK;
  let u = u0 + lane;
  let uc = min(u, p.seq - 1u);
  let keyValid = u < p.seq && mask[b * p.seq + uc] != 0i;

  var kv: array<f32, MAX_HD>;
  var vv: array<f32, MAX_HD>;
  var dk: array<f32, MAX_HD>;
  var dv: array<f32, MAX_HD>;
  let kb0 = kvOffset(0u, b, uc, g);
  for (var d = 0u; d < MAX_HD; d++) {
    let dc = min(d, HEAD_DIM - 1u);
    kv[d] = select(0.0, Kc[kb0 + dc], d < HEAD_DIM);
    vv[d] = select(0.0, Vc[kb0 + dc], d < HEAD_DIM);
    dk[d] = 0.0;
    dv[d] = 0.0;
  }
  var qx: array<f32, SPLIT>;
  var gx: array<f32, SPLIT>;

  // Step-0 keys: query rows u0 .. S − 1 of every head in the group.
  for (var hh = 0u; hh < groupSize; hh++) {
    let h = g * groupSize + hh;
    for (var t = min(u0, p.seq); t < p.seq; t++) {
      let qBase = ((b * p.seq + t) * p.heads + h) * HEAD_DIM;
      for (var i = 0u; i < splitSlots(); i++) {
        let d = min(lane + 8u * i, HEAD_DIM - 1u);
        qx[i] = Q[qBase + d];
        gx[i] = dO[qBase + d];
      }
      let si = 2u * ((b * p.heads + h) * p.seq + t);
      let s = dotSplit(&kv, &qx) * p.scale;
      let dp = dotSplit(&vv, &gx);
      let ok = keyValid && t >= u;
      // The select before exp keeps blocked entries from ever producing inf.
      let pr = select(0.0, exp(select(-100.0, s - rowStats[si], ok)), ok);
      axpySplit(&dk, pr * (dp - rowStats[si + 1u]), 1.0, &qx);
      axpySplit(&dv, pr, 1.0, &gx);
    }
  }
  if (u < p.seq) { storeRow(kb0, &dk, &dv); }

  // Diagonal keys K_j[u], j = 1..step: only query row t = u of each head sees them, so each lane
  // reads its own rows.
  for (var j = 1u; j <= p.step; j++) {
    let kb = kvOffset(j, b, uc, g);
    for (var d = 0u; d < HEAD_DIM; d++) {
      kv[d] = Kc[kb + d];
      vv[d] = Vc[kb + d];
      dk[d] = 0.0;
      dv[d] = 0.0;
    }
    for (var hh = 0u; hh < groupSize; hh++) {
      let h = g * groupSize + hh;
      let qBase = ((b * p.seq + uc) * p.heads + h) * HEAD_DIM;
      var s = 0.0;
      var dp = 0.0;
      for (var d = 0u; d < HEAD_DIM; d++) {
        s = fma(kv[d], Q[qBase + d], s);
        dp = fma(vv[d], dO[qBase + d], dp);
      }
      let si = 2u * ((b * p.heads + h) * p.seq + uc);
      let pj = exp(s * p.scale - rowStats[si]);
      let dsj = pj * (dp - rowStats[si + 1u]);
      for (var d = 0u; d < HEAD_DIM; d++) {
        dk[d] = fma(dsj, Q[qBase + d], dk[d]);
        dv[d] = fma(pj, dO[qBase + d], dv[d]);
      }
    }
    if (u < p.seq) { storeRow(kb, &dk, &dv); }
  }
}
