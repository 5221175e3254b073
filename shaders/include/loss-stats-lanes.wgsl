// include/loss-stats-lanes — the softmax statistics of a row for the `rows` and `subgroup` layouts,
// built from the rowMax / rowSum / rowMinU32 of include/row-reduce-{tree,subgroup}: the end of the
// row reduction of loss/{hard-ce,soft-ce,metrics,teacher}_{rows,subgroup}, with the same functions
// as include/loss-stats-wide, so the one row body in include/<kernel>-row runs in every layout.
// Each lane passes its online partial (m = its max, s = Σ exp(x − m), idx = the column of its first
// max or NO_INDEX); every lane of the row gets the row's value back.
//   rowSoftmax(m, s)         → (row max M, Σ exp(x − M))
//   rowSoftmaxSum(m, s, p)   → (M, Σ exp(x − M), Σ p)
//   rowSoftmaxArgmax(m, s, idx) → RowArgmax (m = M, s = Σ exp(x − M), idx = argmax, ties → lowest)
//   rowPick(v, owner)        → v of the one lane with owner = true (0 if none)
// Numerics: M = rowMax(m) (exact), then the lanes' sums rescaled to it, rowSum(s · exp(m − M));
// the argmax is the lowest index among lanes holding M (rowMinU32); rowPick is a rowSum in which
// every other lane adds 0 (exact). Bit-identical between the two layouts at equal LANES.

// LOWEST is the "no value yet" max of an online partial, NO_INDEX its "no argmax yet".
const LOWEST: f32 = -3.4028234e38;
const NO_INDEX: u32 = 0xffffffffu;

struct RowArgmax {
  m: f32,
  s: f32,
  idx: u32,
}

fn rowSoftmax(m: f32, s: f32, lane: u32, slot: u32) -> vec2<f32> {
  let rowM = rowMax(m, lane, slot);
  return vec2<f32>(rowM, rowSum(s * exp(m - rowM), lane, slot));
}

fn rowSoftmaxSum(m: f32, s: f32, p: f32, lane: u32, slot: u32) -> vec3<f32> {
  let rowM = rowMax(m, lane, slot);
  let rowS = rowSum(s * exp(m - rowM), lane, slot);
  return vec3<f32>(rowM, rowS, rowSum(p, lane, slot));
}

fn rowSoftmaxArgmax(m: f32, s: f32, idx: u32, lane: u32, slot: u32) -> RowArgmax {
  let rowM = rowMax(m, lane, slot);
  let rowS = rowSum(s * exp(m - rowM), lane, slot);
  return RowArgmax(rowM, rowS, rowMinU32(select(NO_INDEX, idx, m == rowM), lane, slot));
}

fn rowPick(v: f32, owner: bool, lane: u32, slot: u32) -> f32 {
  return rowSum(select(0.0, v, owner), lane, slot);
}
