// attention/dq-lanes-prep — attention/prep and attention/dq-lanes in one dispatch: dq-lanes' dQ, and
// rowStats = (L, D) with D = rowsum(dO ⊙ O), which attention/dkv-lanes reads next. dq-lanes' lane r
// holds its query row's dO in registers anyway, and prep's D of that row is all its dS needs, so the
// lane computes D itself and stores (L, D) for dkv; one dispatch per backward fewer.
//
// Shapes (f32 unless noted): as attention/dq-lanes, plus O [B, S, nH, hd] and L [B, nH, S] (the
//   forward's output and log-sum-exp); rowStats [B, nH, S, 2] = (L, D) is written, not read.
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read mask, 5 read dO,
//   6 read_write rowStats, 7 read_write dQ, 8 read O, 9 read L: nine storage buffers, one past
//   WebGPU's default limit, so the host picks this kernel only where the device binds nine
//   (src/kernels/attention.ts), else attention/prep and attention/dq-lanes.
// Dispatch: as attention/dq-lanes, (ceil(S / BR), nH, B) workgroups of BR = 8 invocations; the body
//   is include/attention-dq-lanes. Each (b, t, h) row of rowStats is written by the one lane that owns it.
// Numerics: D is prep's f32 fma over d in increasing order from 0 (the same bits), L is copied, and
//   dQ has dq-lanes' bits. Deterministic. HEAD_DIM ≤ MAX_HD (override).

#include "include/attention-lanes.wgsl"
@group(0) @binding(5) var<storage, read> dO: array<f32>;
@group(0) @binding(6) var<storage, read_write> rowStats: array<f32>;
@group(0) @binding(7) var<storage, read_write> dQ: array<f32>;
@group(0) @binding(8) var<storage, read> O: array<f32>;
@group(0) @binding(9) var<storage, read> L: array<f32>;

#include "include/attention-dq-lanes.wgsl"

// (L, D) of row tc, computed as attention/prep does, and stored for dkv by the lane that owns row t.
fn rowLseAndD(b: u32, h: u32, t: u32, tc: u32, qBase: u32, gv: ptr<function, array<f32, MAX_HD>>) -> vec2<f32> {
  var dsum = 0.0;
  for (var d = 0u; d < HEAD_DIM; d++) { dsum = fma((*gv)[d], O[qBase + d], dsum); }
  let li = (b * p.heads + h) * p.seq + tc;
  let lse = L[li];
  if (t < p.seq) {
    rowStats[2u * li] = lse;
    rowStats[2u * li + 1u] = dsum;
  }
  return vec2<f32>(lse, dsum);
}
