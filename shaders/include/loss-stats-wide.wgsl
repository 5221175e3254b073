// include/loss-stats-wide — the softmax statistics of a row for the `wide` layout
// (include/row-reduce-wide, whose redMax / redSum / redIdx it uses): the end of the row reduction
// of loss/{hard-ce,soft-ce,metrics,teacher}, with the same functions as include/loss-stats-lanes,
// so the one row body in include/<kernel>-row runs in every layout. Each invocation passes its
// online partial (m = its max, s = Σ exp(x − m), idx = the column of its first max or NO_INDEX);
// every invocation gets the row's value back.
//   rowSoftmax(m, s)         → (row max M, Σ exp(x − M))
//   rowSoftmaxSum(m, s, p)   → (M, Σ exp(x − M), Σ p)
//   rowSoftmaxArgmax(m, s, idx) → RowArgmax (m = M, s = Σ exp(x − M), idx = argmax, ties → lowest)
//   rowPick(v, owner)        → v of the one invocation with owner = true (0 if none)
// Numerics: one fixed-order halving tree combines (max, Σexp[, Σp][, argmax]) pairwise,
// s = s1 · exp(m1 − M) + s2 · exp(m2 − M) with M = max(m1, m2) — the wide kernels' original order,
// which differs from the lanes layouts' rowMax-then-rescaled-rowSum only in rounding. The last
// pair (slots 0 and 1) is combined by every invocation itself, the same expression in the same
// order (same bits), saving its barrier. Deterministic; each function ends with a barrier, so the
// next reduction may reuse the arrays.

// LOWEST is the "no value yet" max of an online partial, NO_INDEX its "no argmax yet".
const LOWEST: f32 = -3.4028234e38;
const NO_INDEX: u32 = 0xffffffffu;

struct RowArgmax {
  m: f32,
  s: f32,
  idx: u32,
}

var<workgroup> redP: array<f32, 256>;
var<workgroup> pick: f32;

fn rowSoftmax(m: f32, s: f32, lane: u32, slot: u32) -> vec2<f32> {
  redMax[lane] = m;
  redSum[lane] = s;
  workgroupBarrier();
  for (var step = LANES / 2u; step > 1u; step = step >> 1u) {
    if (lane < step) {
      let m1 = redMax[lane];
      let m2 = redMax[lane + step];
      let mm = max(m1, m2);
      redSum[lane] = redSum[lane] * exp(m1 - mm) + redSum[lane + step] * exp(m2 - mm);
      redMax[lane] = mm;
    }
    workgroupBarrier();
  }
  let mm = max(redMax[0], redMax[1]);
  let out = vec2<f32>(mm, redSum[0] * exp(redMax[0] - mm) + redSum[1] * exp(redMax[1] - mm));
  workgroupBarrier();
  return out;
}

fn rowSoftmaxSum(m: f32, s: f32, p: f32, lane: u32, slot: u32) -> vec3<f32> {
  redMax[lane] = m;
  redSum[lane] = s;
  redP[lane] = p;
  workgroupBarrier();
  for (var step = LANES / 2u; step > 1u; step = step >> 1u) {
    if (lane < step) {
      let m1 = redMax[lane];
      let m2 = redMax[lane + step];
      let mm = max(m1, m2);
      redSum[lane] = redSum[lane] * exp(m1 - mm) + redSum[lane + step] * exp(m2 - mm);
      redMax[lane] = mm;
      redP[lane] = redP[lane] + redP[lane + step];
    }
    workgroupBarrier();
  }
  let mm = max(redMax[0], redMax[1]);
  let out = vec3<f32>(mm, redSum[0] * exp(redMax[0] - mm) + redSum[1] * exp(redMax[1] - mm), redP[0] + redP[1]);
  workgroupBarrier();
  return out;
}

fn rowSoftmaxArgmax(m: f32, s: f32, idx: u32, lane: u32, slot: u32) -> RowArgmax {
  redMax[lane] = m;
  redSum[lane] = s;
  redIdx[lane] = idx;
  workgroupBarrier();
  for (var step = LANES / 2u; step > 1u; step = step >> 1u) {
    if (lane < step) {
      let m1 = redMax[lane];
      let m2 = redMax[lane + step];
      let mm = max(m1, m2);
      redSum[lane] = redSum[lane] * exp(m1 - mm) + redSum[lane + step] * exp(m2 - mm);
      var id = min(redIdx[lane], redIdx[lane + step]);
      if (m1 > m2) { id = redIdx[lane]; } else if (m2 > m1) { id = redIdx[lane + step]; }
      redMax[lane] = mm;
      redIdx[lane] = id;
    }
    workgroupBarrier();
  }
  let m1 = redMax[0];
  let m2 = redMax[1];
  let mm = max(m1, m2);
  var id = min(redIdx[0], redIdx[1]);
  if (m1 > m2) { id = redIdx[0]; } else if (m2 > m1) { id = redIdx[1]; }
  let out = RowArgmax(mm, redSum[0] * exp(m1 - mm) + redSum[1] * exp(m2 - mm), id);
  workgroupBarrier();
  return out;
}

// One row per workgroup, and workgroup memory starts zeroed, so `pick` is 0 when no invocation owns
// the value; one barrier instead of a tree.
fn rowPick(v: f32, owner: bool, lane: u32, slot: u32) -> f32 {
  if (owner) { pick = v; }
  workgroupBarrier();
  return pick;
}
