// include/target-stats-row — the row body of loss/target-stats in all three layouts (loss/target-stats,
// loss/target-stats-rows, loss/target-stats-subgroup): what a rollout keeps of each row of the target's
// full-vocabulary logits when it sends compact features (docs/features.md §8), written as processRow
// for include/row-reduce-{wide,tree,subgroup} (LANES, main) with include/loss-stats-{wide,lanes}
// (rowSoftmaxArgmax, LOWEST, NO_INDEX):
//   lse[r] = logsumexp_v T[r, v]        (f32)
//   tok[r] = argmax_v T[r, v]           (ties → lowest id)
// exactly pass 1 of include/teacher-row (same online max / Σexp / argmax per lane, same combine), so
// a teacher built later from the draft columns, this lse and this tok (loss/teacher-pruned) gives
// the teacher of the full logits. Deterministic.

struct Params {
  count: u32,
  rowStart: u32,
  V: u32,
  tPart: u32,
  lsePart: u32,
  tokPart: u32,
}

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read> T: array<f32>;
@group(0) @binding(2) var<storage, read_write> LSE: array<f32>;
@group(0) @binding(3) var<storage, read_write> TOK: array<i32>;

fn rowCount() -> u32 { return u.count; }

fn processRow(i: u32, lane: u32, slot: u32) {
  let live = i < u.count;
  let r = u.rowStart + i;
  let tBase = (r - u.tPart) * u.V;
  let nV = select(0u, u.V, live); // a row past the end reads and writes nothing

  var m = LOWEST;
  var s = 0.0;
  var idx = NO_INDEX;
  for (var v = lane; v < nV; v += LANES) {
    let x = T[tBase + v];
    if (x > m) {
      s = s * exp(m - x) + 1.0;
      m = x;
      idx = v;
    } else {
      s += exp(x - m);
    }
  }
  let full = rowSoftmaxArgmax(m, s, idx, lane, slot);
  if (live && lane == 0u) {
    LSE[r - u.lsePart] = full.m + log(full.s);
    TOK[r - u.tokPart] = i32(full.idx);
  }
}
