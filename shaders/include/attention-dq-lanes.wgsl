// include/attention-dq-lanes — the entry point of attention/dq-lanes and attention/dq-lanes-prep (their
// contract, bindings and dispatch are stated there): lane r of workgroup (x, h, b) owns query row
// t = x·8 + r of head h, batch b, with q, dO and the dQ accumulator in registers. Rows past the
// sequence clamp to its last row, so every lane takes part in the subgroup broadcasts, and store nothing.
// The including shader declares dO and dQ, and
//   fn rowLseAndD(b, h, t, tc, qBase, gv: ptr<function, array<f32, MAX_HD>>) -> vec2<f32>
// returning (L, D) of row tc (qBase: its offset in Q and dO; gv: its dO, zero past HEAD_DIM).

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
  var gv: array<f32, MAX_HD>; // the row of dO
  var acc: array<f32, MAX_HD>;
  for (var d = 0u; d < MAX_HD; d++) {
    let dc = min(d, HEAD_DIM - 1u);
    qv[d] = select(0.0, Q[qBase + dc], d < HEAD_DIM);
    gv[d] = select(0.0, dO[qBase + dc], d < HEAD_DIM);
    acc[d] = 0.0;
  }
  // (L, D) of row tc: read from attention/prep's rowStats, or computed here (dq-lanes-prep).
  let stats = rowLseAndD(b, h, t, tc, qBase, &gv);
  let Lr = stats.x;
  let Dr = stats.y;
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
