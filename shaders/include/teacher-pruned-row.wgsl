// include/teacher-pruned-row — the row body of loss/teacher-pruned in all three layouts
// (loss/teacher-pruned, -rows, -subgroup): the EAGLE3 teacher (docs/eagle3.md §5) from compact
// features, written as processRow for include/row-reduce-{wide,tree,subgroup} (LANES, main) with
// include/loss-stats-{wide,lanes} (rowSoftmax, LOWEST). Per row r of the segment (r = rowStart + i):
//   Z[r, d]  the target's logits of the D draft tokens (its final hidden state times the lm_head rows
//            of the draft vocabulary, computed by the trainer)
//   LSE[r]   logsumexp of the target's full-vocabulary logits, TOK[r] their argmax (loss/target-stats,
//            computed by the rollout)
// it writes
//   p[r, d] = softmax_d Z[r, d]                    (renormalised over the D draft columns)
//   q[r, d] = exp(Z[r, d] − LSE[r])                (p̃: target mass, NOT renormalised)
//   pm[r]   = lossMask[r] if t2d[TOK[r]] != 0 else 0 (position mask; TOK < 0 never matches)
// the same as include/teacher-row on the full logits, whose pass 2 and 3 this is (the draft columns'
// own max keeps p finite when every draft token is far below the full-vocab max). Deterministic.

struct Params {
  count: u32,
  rowStart: u32,
  V: u32,
  D: u32,
  zPart: u32,
  lsePart: u32,
  tokPart: u32,
  lmPart: u32,
  pPart: u32,
  qPart: u32,
  pmPart: u32,
}

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read> Z: array<f32>;
@group(0) @binding(2) var<storage, read> LSE: array<f32>;
@group(0) @binding(3) var<storage, read> TOK: array<i32>;
@group(0) @binding(4) var<storage, read> t2d: array<i32>;
@group(0) @binding(5) var<storage, read> lm: array<i32>;
@group(0) @binding(6) var<storage, read_write> P: array<f32>;
@group(0) @binding(7) var<storage, read_write> Q: array<f32>;
@group(0) @binding(8) var<storage, read_write> PM: array<i32>;

fn rowCount() -> u32 { return u.count; }

fn processRow(i: u32, lane: u32, slot: u32) {
  let live = i < u.count;
  let r = u.rowStart + i;
  let zBase = (r - u.zPart) * u.D;
  let nD = select(0u, u.D, live); // a row past the end reads and writes nothing

  // Max and Σexp over the draft columns.
  var dm = LOWEST;
  var ds = 0.0;
  for (var d = lane; d < nD; d += LANES) {
    let x = Z[zBase + d];
    if (x > dm) {
      ds = ds * exp(dm - x) + 1.0;
      dm = x;
    } else {
      ds += exp(x - dm);
    }
  }
  let draft = rowSoftmax(dm, ds, lane, slot);
  let dMax = draft.x;
  let dInv = 1.0 / draft.y;
  var lse = 0.0;
  if (live) {
    lse = LSE[r - u.lsePart];
  }

  let pBase = (r - u.pPart) * u.D;
  let qBase = (r - u.qPart) * u.D;
  for (var d = lane; d < nD; d += LANES) {
    let x = Z[zBase + d];
    P[pBase + d] = exp(x - dMax) * dInv;
    Q[qBase + d] = exp(x - lse);
  }
  if (live && lane == 0u) {
    let tok = TOK[r - u.tokPart];
    let inDraft = tok >= 0 && u32(tok) < u.V && t2d[u32(max(tok, 0))] != 0;
    PM[r - u.pmPart] = select(0, lm[r - u.lmPart], inDraft);
  }
}
