// attention/decode — one query row per sequence against its KV cache (token-by-token generation):
//   o[b, h] = Σ_{u < len[b]} softmax_u(q[b, h] · K[b, u, g] · scale) · V[b, u, g],  g = h / (nH / nKV)
// The new token's own key/value must already be in the cache at position len[b] − 1. There is no
// causal or padding mask beyond the length: a cache only ever holds real tokens below len[b].
//
// Shapes (row-major f32 unless noted):
//   Q       [B, nH, hd]          (the q projection of one token per sequence, RoPE applied)
//   Kc, Vc  [B, T, nKV, hd]      T = cache capacity (Params.maxLen)
//   len     [B] i32              valid cache entries per sequence (clamped to [0, T])
//   O       [B, nH, hd]
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read len,
//   5 read_write O.
// Dispatch: (nH, B) workgroups of WG invocations. Keys stream in tiles of WG: invocation i scores
// key u0 + i (a full hd dot product against q held in workgroup memory), then every invocation runs
// the same online-softmax update over the tile's WG scores in the same order (so all agree on the
// running max and sum) and accumulates head dims d = i and i + WG of the output.
// The grid does not depend on WG (internal, 64); the head-dim capacity MAX_HEAD_DIM is
// DECODE_MAX_HEAD_DIM in src/kernels/attention-decode.ts (which refuses larger heads), appended to
// this source as a constant.
// Numerics: f32, online softmax (running max m, running sum ℓ, rescaled accumulator). A sequence
// with len 0 writes O = 0. HEAD_DIM ≤ MAX_HEAD_DIM (override constant, one pipeline per head size).

struct Params {
  batch: u32,
  heads: u32,
  kvHeads: u32,
  maxLen: u32,
  scale: f32,
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

override HEAD_DIM: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> Kc: array<f32>;
@group(0) @binding(3) var<storage, read> Vc: array<f32>;
@group(0) @binding(4) var<storage, read> lengths: array<i32>;
@group(0) @binding(5) var<storage, read_write> O: array<f32>;

const WG: u32 = 64u;
const NEG: f32 = -3.0e38; // "no score yet"; finite so that differences never make NaN
// Each invocation accumulates two output dims (acc0, acc1).
const_assert MAX_HEAD_DIM <= 2u * WG;

var<workgroup> qs: array<f32, MAX_HEAD_DIM>;
var<workgroup> scores: array<f32, WG>;
var<workgroup> lenShared: u32;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
  let h = wg.x;
  let b = wg.y;
  let g = h / (p.heads / p.kvHeads);
  let qBase = (b * p.heads + h) * HEAD_DIM;
  if (tid == 0u) { lenShared = min(u32(max(lengths[b], 0i)), p.maxLen); }
  for (var d = tid; d < HEAD_DIM; d += WG) { qs[d] = Q[qBase + d]; }
  // Uniform across the workgroup, so the loop below may contain barriers.
  let len = workgroupUniformLoad(&lenShared);

  var acc0 = 0.0; // head dim tid
  var acc1 = 0.0; // head dim tid + WG
  var m = NEG;
  var lsum = 0.0;
  let tiles = (len + WG - 1u) / WG;
  for (var tile = 0u; tile < tiles; tile++) {
    let u0 = tile * WG;
    let u = u0 + tid;
    var s = NEG;
    if (u < len) {
      let kb = ((b * p.maxLen + u) * p.kvHeads + g) * HEAD_DIM;
      var dot = 0.0;
      for (var d = 0u; d < HEAD_DIM; d++) { dot = fma(qs[d], Kc[kb + d], dot); }
      s = dot * p.scale;
    }
    scores[tid] = s;
    workgroupBarrier();
    let count = min(WG, len - u0);
    var tileMax = NEG;
    for (var c = 0u; c < count; c++) { tileMax = max(tileMax, scores[c]); }
    let mNew = max(m, tileMax);
    let alpha = exp(m - mNew);
    lsum = lsum * alpha;
    acc0 = acc0 * alpha;
    acc1 = acc1 * alpha;
    for (var c = 0u; c < count; c++) {
      let pc = exp(scores[c] - mNew);
      lsum += pc;
      let vb = ((b * p.maxLen + u0 + c) * p.kvHeads + g) * HEAD_DIM;
      if (tid < HEAD_DIM) { acc0 = fma(pc, Vc[vb + tid], acc0); }
      if (tid + WG < HEAD_DIM) { acc1 = fma(pc, Vc[vb + tid + WG], acc1); }
    }
    m = mNew;
    workgroupBarrier();
  }

  let inv = select(1.0 / max(lsum, 1e-30), 0.0, lsum == 0.0);
  if (tid < HEAD_DIM) { O[qBase + tid] = acc0 * inv; }
  if (tid + WG < HEAD_DIM) { O[qBase + tid + WG] = acc1 * inv; }
}
