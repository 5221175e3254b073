// attention/dq-lanes — attention/dq's contract (dQ of the causal / TTT-diagonal attention; same
// shapes, bindings 0..7 and Params) in attention/forward-lanes' layout: one subgroup of 8 lanes
// per workgroup, lane r owns query row wg.x·8 + r whole (q, dO and the dQ accumulator in
// registers), every key / value row loaded once per workgroup, split across the lanes
// (include/attention-lanes), no workgroup memory, no barriers. forward-lanes says why.
//
// For query row t: P = exp(s − L) with s = q·k · scale recomputed, dp = dO·v, D = rowsum(dO ⊙ O),
// dS = P ⊙ (dp − D), dQ[t] = scale · Σ_u dS[t,u] k_u over the step-0 keys u ≤ t with mask[u] = 1
// and the diagonal keys K_j[t], j = 1..step. L and D come from attention/prep (rowStats), or, in
// attention/dq-lanes-prep, from this kernel itself.
// Shapes (f32 unless noted): Q, dO, dQ [B, S, nH, hd]; Kc, Vc [J, B, S, nKV, hd] (J ≥ step + 1);
//   mask [B, S] i32; rowStats [B, nH, S, 2] = (L, D).
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read mask, 5 read dO,
//   6 read rowStats, 7 read_write dQ.
// Dispatch: (ceil(S / BR), nH, B) workgroups of BR = 8 invocations; the body, which lane owns which
//   row, is include/attention-dq-lanes (shared with attention/dq-lanes-prep).
// Numerics: f32, fma in increasing d and in increasing key order; the same formulas as
// attention/dq, whose dot products are summed in another order (TPR partial sums), so the two
// differ in the last bits. Deterministic. HEAD_DIM ≤ MAX_HD (override).

#include "include/attention-lanes.wgsl"
@group(0) @binding(5) var<storage, read> dO: array<f32>;
@group(0) @binding(6) var<storage, read> rowStats: array<f32>;
@group(0) @binding(7) var<storage, read_write> dQ: array<f32>;

#include "include/attention-dq-lanes.wgsl"

// (L, D) of row tc, as attention/prep packed them.
fn rowLseAndD(b: u32, h: u32, t: u32, tc: u32, qBase: u32, gv: ptr<function, array<f32, MAX_HD>>) -> vec2<f32> {
  let si = 2u * ((b * p.heads + h) * p.seq + tc);
  return vec2<f32>(rowStats[si], rowStats[si + 1u]);
}
