// attention/probs — the attention probabilities of ONE sequence at one EAGLE3 TTT step, written out
// (docs/eagle3.md §4, docs/insight.md). The flash kernels never store them; this kernel exists so
// the lab can show what the draft attends to. Read-only with respect to training: it has no
// backward and writes nothing but P.
//
// Shapes (row-major; element offsets from each binding's start):
//   Q    [B, S, nH, hd] f32          this step's RoPE'd queries (the forward's qRot)
//   Kc   [J, B, S, nKV, hd] f32      the forward's key cache, J ≥ step + 1 (slot j = K_j)
//   mask [B, S] i32                  1 = real token, 0 = padding
//   L    [B, nH, S] f32              this step's log-sum-exp, as attention/forward wrote it
//   P    [slots, nH, S, W] f32       W = S + slots − 1 key columns per query row:
//                                    column u < S is step-0 key u, column S + j − 1 is the
//                                    diagonal key K_j[i] (j = 1 .. slots − 1)
// Only sequence b = p.sample of the batch is read, and only P's slot p.slot = the step is written.
// Bindings (group 0): 0 uniform Params, 1 read Q, 2 read Kc, 3 read mask, 4 read L, 5 read_write P.
// Dispatch: (ceil(W / WG), S, nH) workgroups of WG invocations; invocation (x, i, h) writes
// P[slot, h, i, x] — one key column of one query row of one head. Every entry of the slot is
// written, visible or not.
// Visibility (the training rule): column u < S is visible iff u ≤ i and mask[b, u] = 1; diagonal
// column j is visible iff j ≤ step. Query head h reads kv head h / (nH / nKV).
// Numerics — those of the flash forward, so the entries are the probabilities training used:
//   s = q·k summed as attention/forward sums it: TPR partial dot products (partial l over the dims
//       d ≡ l mod TPR, fma in increasing d), added in forward's fixed pairwise order, then × scale
//       (the host passes the TPR of the geometry the forward ran with: bit-identical scores);
//   P = exp(s − L) for visible keys, exactly 0 for blocked ones (the select keeps a blocked entry
//       from ever evaluating exp of a large value, as attention/dq recomputes P). Each visible row
//       sums to 1 up to f32 rounding; a row with no visible key (L = 0, only at step 0 when every
//       key up to it is padding) is all zeros.
// HEAD_DIM is an override constant (one pipeline per head size); WG (ATTENTION_PROBS_WG) and TPR come
// from the kernel module src/kernels/attention-probs.ts, appended to this source as constants; the
// host's grid uses the same WG.

struct Params {
  batch: u32,
  seq: u32,
  heads: u32,
  kvHeads: u32,
  step: u32,
  sample: u32,
  width: u32,
  slot: u32,
  scale: f32,
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

override HEAD_DIM: u32 = 64u;
const_assert TPR == 1u || TPR == 2u || TPR == 4u || TPR == 8u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> Kc: array<f32>;
@group(0) @binding(3) var<storage, read> mask: array<i32>;
@group(0) @binding(4) var<storage, read> L: array<f32>;
@group(0) @binding(5) var<storage, read_write> P: array<f32>;

fn kvOffset(j: u32, b: u32, u: u32, g: u32) -> u32 {
  return (((j * p.batch + b) * p.seq + u) * p.kvHeads + g) * HEAD_DIM;
}

// Partial dot product of lane l: dims d = l, l + TPR, … in increasing order, as one forward lane.
fn lanePartial(qBase: u32, kBase: u32, l: u32) -> f32 {
  var s = 0.0;
  for (var d = l; d < HEAD_DIM; d += TPR) { s = fma(Q[qBase + d], Kc[kBase + d], s); }
  return s;
}

// The forward's sumP tree over the TPR lane partials.
fn score(qBase: u32, kBase: u32) -> f32 {
  if (TPR == 1u) { return lanePartial(qBase, kBase, 0u); }
  if (TPR == 2u) { return lanePartial(qBase, kBase, 0u) + lanePartial(qBase, kBase, 1u); }
  let a = (lanePartial(qBase, kBase, 0u) + lanePartial(qBase, kBase, 1u)) + (lanePartial(qBase, kBase, 2u) + lanePartial(qBase, kBase, 3u));
  if (TPR == 4u) { return a; }
  return a + ((lanePartial(qBase, kBase, 4u) + lanePartial(qBase, kBase, 5u)) + (lanePartial(qBase, kBase, 6u) + lanePartial(qBase, kBase, 7u)));
}

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = gid.x;
  let i = gid.y;
  let h = gid.z;
  if (x >= p.width || i >= p.seq || h >= p.heads) { return; }
  let b = p.sample;
  let g = h / (p.heads / p.kvHeads);
  var ok = false;
  var kBase = 0u;
  if (x < p.seq) {
    ok = x <= i && mask[b * p.seq + x] != 0i;
    kBase = kvOffset(0u, b, x, g);
  } else {
    let j = x - p.seq + 1u;
    ok = j <= p.step;
    kBase = kvOffset(select(0u, j, ok), b, i, g);
  }
  var prob = 0.0;
  if (ok) {
    let s = score(((b * p.seq + i) * p.heads + h) * HEAD_DIM, kBase) * p.scale;
    prob = exp(s - L[(b * p.heads + h) * p.seq + i]);
  }
  P[((p.slot * p.heads + h) * p.seq + i) * p.width + x] = prob;
}
