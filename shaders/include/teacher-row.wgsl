// include/teacher-row — the row body of loss/teacher in all three layouts (loss/teacher,
// loss/teacher-rows, loss/teacher-subgroup): the contract, Params and bindings of loss/teacher
// (tok = argmax, position mask, p = softmax over the draft columns, p̃ = target mass of the draft
// columns), written as processRow for include/row-reduce-{wide,tree,subgroup} (LANES, main) with
// include/loss-stats-{wide,lanes} (rowSoftmaxArgmax, rowSoftmax, LOWEST, NO_INDEX).
// Numerics: per lane an online (max, Σexp, first argmax) over columns lane, lane + LANES, …,
// combined by rowSoftmaxArgmax (ties → lowest id). The draft columns get their own max
// (rowSoftmax), so p stays finite when every draft token is far below the full-vocab max.
// Deterministic.

struct Params {
  count: u32,
  rowStart: u32,
  V: u32,
  D: u32,
  tPart: u32,
  lmPart: u32,
  pPart: u32,
  qPart: u32,
  tokPart: u32,
  pmPart: u32,
}

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read> T: array<f32>;
@group(0) @binding(2) var<storage, read> t2d: array<i32>;
@group(0) @binding(3) var<storage, read> used: array<i32>;
@group(0) @binding(4) var<storage, read> lm: array<i32>;
@group(0) @binding(5) var<storage, read_write> P: array<f32>;
@group(0) @binding(6) var<storage, read_write> Q: array<f32>;
@group(0) @binding(7) var<storage, read_write> TOK: array<i32>;
@group(0) @binding(8) var<storage, read_write> PM: array<i32>;

fn rowCount() -> u32 { return u.count; }

fn processRow(i: u32, lane: u32, slot: u32) {
  let live = i < u.count;
  let r = u.rowStart + i;
  let tBase = (r - u.tPart) * u.V;
  let nV = select(0u, u.V, live); // a row past the end reads and writes nothing
  let nD = select(0u, u.D, live);

  // Pass 1: full-vocab max, Σexp and argmax.
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
  let lse = full.m + log(full.s);
  let tok = full.idx;

  // Pass 2: max and Σexp over the gathered draft columns.
  var dm = LOWEST;
  var ds = 0.0;
  for (var d = lane; d < nD; d += LANES) {
    let x = T[tBase + u32(used[d])];
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

  // Pass 3: write p and p̃.
  let pBase = (r - u.pPart) * u.D;
  let qBase = (r - u.qPart) * u.D;
  for (var d = lane; d < nD; d += LANES) {
    let x = T[tBase + u32(used[d])];
    P[pBase + d] = exp(x - dMax) * dInv;
    Q[qBase + d] = exp(x - lse);
  }
  if (live && lane == 0u) {
    TOK[r - u.tokPart] = i32(tok);
    PM[r - u.pmPart] = select(0, lm[r - u.lmPart], t2d[tok] != 0);
  }
}
