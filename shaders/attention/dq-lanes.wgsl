// attention/dq-lanes — attention/dq's contract (dQ of the causal / TTT-diagonal attention; same
// shapes, bindings 0..7 and Params) in attention/forward-lanes' layout: one subgroup of 8 lanes
// per workgroup, lane r owns query row wg.x·8 + r whole (q, dO and the dQ accumulator in
// registers), every key / value row loaded once per workgroup, split across the lanes
// (include/attention-lanes), no workgroup memory, no barriers. forward-lanes says why.
//
// For query row t: P = exp(s − L) with s = q·k · scale recomputed, dp = dO·v, D = rowsum(dO ⊙ O),
// dS = P ⊙ (dp − D), dQ[t] = scale · Σ_u dS[t,u] k_u over the step-0 keys u ≤ t with mask[u] = 1
// and the diagonal keys K_j[t], j = 1..step. L and D come from attention/prep (rowStats).
// Shapes (f32 unless noted): Q, dO, dQ [B, S, nH, hd]; Kc, Vc [J, B, S, nKV, hd] (J ≥ step + 1);
//   mask [B, S] i32; rowStats [B, nH, S, 2] = (L, D).
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read mask, 5 read dO,
//   6 read rowStats, 7 read_write dQ.
// Dispatch: (ceil(S / BR), nH, B) workgroups of BR = 8 invocations.
// Numerics: f32, fma in increasing d and in increasing key order; the same formulas as
// attention/dq, whose dot products are summed in another order (TPR partial sums), so the two
// differ in the last bits. Deterministic. HEAD_DIM ≤ MAX_HD (override).

#include "include/attention-lanes.wgsl"
@group(0) @binding(5) var<storage, read> dO: array<f32>;
@group(0) @binding(6) var<storage, read> rowStats: array<f32>;
@group(0) @binding(7) var<storage, read_write> dQ: array<f32>;

const_assert BR == 8u;

#include "include/attention-kv-offset.wgsl"

@compute @workgroup_size(BR, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32) {
  let b = wg.z;
  let h = wg.y;
  let g = h / (p.heads / p.kvHeads);
  let t0 = wg.x * BR;
  let t = t0 + lane;
  let tc = min(t, p.seq - 1u);
  let qBase = ((b * p.seq + tc) * p.heads + h) * HEAD_DIM;
  let si = 2u * ((b * p.heads + h) * p.seq + tc);
  let Lr = rowStats[si];
  let Dr = rowStats[si + 1u];

  var qv: array<f32, MAX_HD>;
  var gv: array<f32, MAX_HD>; // the row of dO
  var acc: array<f32, MAX_HD>;
  for (var d = 0u; d < MAX_HD; d++) {
    let dc = min(d, HEAD_DIM - 1u);
    qv[d] = select(0.0, Q[qBase + dc], d < HEAD_DIM);
    gv[d] = select(0.0, dO[qBase + dc], d < HEAD_DIM);
    acc[d] = 0.0;
  }
  var kx: array<f32, SPLIT>;
  var vx: array<f32, SPLIT>;

  let keyEnd = min(t0 + BR, p.seq);
  for (var u = 0u; u < keyEnd; u++) {
    let kb = kvOffset(0u, b, u, g);
    for (var i = 0u; i < splitSlots(); i++) {
      let d = min(lane + 8u * i, HEAD_DIM - 1u);
      kx[i] = Kc[kb + d];
      vx[i] = Vc[kb + d];
    }
    let s = dotSplit(&qv, &kx) * p.scale;
    let dp = dotSplit(&gv, &vx);
    let ok = u <= t && mask[b * p.seq + u] != 0i;
    // The select before exp keeps blocked entries from ever producing inf.
    let pr = select(0.0, exp(select(-100.0, s - Lr, ok)), ok);
    axpySplit(&acc, pr * (dp - Dr), 1.0, &kx);
  }

  // Diagonal keys K_j[t], j = 1..step (never masked): one per row, each lane reads its own.
  for (var j = 1u; j <= p.step; j++) {
    let kb = kvOffset(j, b, tc, g);
    var s = 0.0;
    var dp = 0.0;
    for (var d = 0u; d < HEAD_DIM; d++) {
      s = fma(qv[d], Kc[kb + d], s);
      dp = fma(gv[d], Vc[kb + d], dp);
    }
    let dsj = exp(s * p.scale - Lr) * (dp - Dr);
    for (var d = 0u; d < HEAD_DIM; d++) { acc[d] = fma(dsj, Kc[kb + d], acc[d]); }
  }

  if (t >= p.seq) { return; }
  for (var d = 0u; d < HEAD_DIM; d++) { dQ[qBase + d] = acc[d] * p.scale; }
}
