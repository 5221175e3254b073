// attention/forward-lanes — attention/forward's contract (shapes, bindings 0..6, Params, TTT
// diagonal keys, the empty-row rule) for CPU-like adapters with subgroups: no workgroup memory,
// no barriers, and each key / value row loaded once per workgroup, split across its lanes.
//
// Shapes (row-major f32 unless noted): Q, O [B, S, nH, hd]; Kc, Vc [J, B, S, nKV, hd] (J ≥ step + 1);
//   mask [B, S] i32; L [B, nH, S]. Row t attends to step-0 keys u ≤ t with mask[u] = 1 and to
//   K_j[t], j = 1..step; query head h reads kv head h / (nH / nKV).
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read mask,
//   5 read_write O, 6 read_write L.
//
// Why: llvmpipe runs a workgroup on one CPU thread as SIMD vectors of invocations; each barrier
// switches between those vectors, and each storage load is a per-lane gather. attention/forward
// pays both for every key tile. Here a workgroup is one subgroup of 8 lanes, lane r owns query
// row wg.x·8 + r whole (query and accumulator in registers), and every key row is loaded split
// (include/attention-lanes) and broadcast to the lanes that need it.
// Dispatch: (ceil(S / BR), nH, B) workgroups of BR = 8 invocations (the geometry record's BR; the
// host runs this kernel only where subgroups have at least 8 lanes). Step-0 keys run from 0 to the
// block's last row; row t skips keys u > t, and padded keys, by a flag.
// Numerics: f32; q·k by fma in increasing d, then · scale; online softmax one key at a time, so O
// and L differ from attention/forward (which groups BC keys) in their last bits. Deterministic.
// HEAD_DIM ≤ MAX_HD (override; MAX_HD a multiple of 8).

#include "include/attention-lanes.wgsl"
@group(0) @binding(5) var<storage, read_write> O: array<f32>;
@group(0) @binding(6) var<storage, read_write> L: array<f32>;

const NEG: f32 = -3.0e38; // "no score yet"; finite so that differences never make NaN
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

  var qv: array<f32, MAX_HD>;
  var acc: array<f32, MAX_HD>;
  for (var d = 0u; d < MAX_HD; d++) {
    qv[d] = select(0.0, Q[qBase + min(d, HEAD_DIM - 1u)], d < HEAD_DIM);
    acc[d] = 0.0;
  }
  var m = NEG;
  var lsum = 0.0;
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
    let ok = u <= t && mask[b * p.seq + u] != 0i;
    let mNew = select(m, max(m, s), ok);
    let alpha = exp(m - mNew);
    let pu = select(0.0, exp(s - mNew), ok);
    lsum = fma(lsum, alpha, pu);
    axpySplit(&acc, pu, alpha, &vx);
    m = mNew;
  }

  // Diagonal keys K_j[t], j = 1..step: one per row, so each lane reads its own whole row.
  for (var j = 1u; j <= p.step; j++) {
    let kb = kvOffset(j, b, tc, g);
    var s = 0.0;
    for (var d = 0u; d < HEAD_DIM; d++) { s = fma(qv[d], Kc[kb + d], s); }
    s *= p.scale;
    let mNew = max(m, s);
    let alpha = exp(m - mNew);
    let pj = exp(s - mNew);
    lsum = fma(lsum, alpha, pj);
    for (var d = 0u; d < HEAD_DIM; d++) { acc[d] = fma(pj, Vc[kb + d], acc[d] * alpha); }
    m = mNew;
  }

  if (t >= p.seq) { return; }
  let empty = lsum == 0.0;
  let inv = select(1.0 / max(lsum, 1e-30), 0.0, empty);
  for (var d = 0u; d < HEAD_DIM; d++) { O[qBase + d] = acc[d] * inv; }
  L[(b * p.heads + h) * p.seq + t] = select(m + log(max(lsum, 1e-30)), 0.0, empty);
}
