// include/metrics-row — the row body of loss/metrics in all three layouts (loss/metrics,
// loss/metrics-rows, loss/metrics-subgroup): the contract, Params and bindings of loss/metrics
// (per-row terms O[r] = (c, ℓ, m·α, m) for TTT step k), written as processRow for
// include/row-reduce-{wide,tree,subgroup} (LANES, rowSumFinal, main) with include/loss-stats-{wide,lanes}
// (rowSoftmaxArgmax, LOWEST, NO_INDEX).
// Numerics: per lane an online (max, Σexp, first argmax) over columns lane, lane + LANES, …,
// combined by rowSoftmaxArgmax (ties → lowest draft id); α's partials by rowSumFinal. Rows with
// ℓ = m = 0 skip the passes. Deterministic.
// Steps at once: row j = rowStart + i of Z is row r = j mod stepRows of TTT step k + s, s = j / stepRows
// (one step when stepRows is the step's row count), its terms at O[s·oStride + 4r].
// Each row's arithmetic is the same as in a dispatch of its step alone.

struct Params {
  count: u32,
  rowStart: u32,
  D: u32,
  S: u32,
  k: u32,
  zPart: u32,
  qPart: u32,
  tokPart: u32,
  lmPart: u32,
  pmPart: u32,
  oPart: u32,
  stepRows: u32,
  oStride: u32,
}

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read> Z: array<f32>;
@group(0) @binding(2) var<storage, read> Q: array<f32>;
@group(0) @binding(3) var<storage, read> TOK: array<i32>;
@group(0) @binding(4) var<storage, read> LM: array<i32>;
@group(0) @binding(5) var<storage, read> PM: array<i32>;
@group(0) @binding(6) var<storage, read> used: array<i32>;
@group(0) @binding(7) var<storage, read_write> O: array<f32>;

fn rowCount() -> u32 { return u.count; }

fn processRow(i: u32, lane: u32, slot: u32) {
  let live = i < u.count;
  let j = u.rowStart + i;
  let step = j / u.stepRows;
  let r = j - step * u.stepRows;
  let k = u.k + step;
  let inSeq = (r % u.S) + k < u.S;
  let rs = r + k;
  var lm = 0;
  var pm = 0;
  var tok = 0;
  if (live && inSeq) {
    lm = LM[rs - u.lmPart];
    pm = PM[rs - u.pmPart];
    tok = TOK[rs - u.tokPart];
  }
  let n = select(0u, u.D, lm != 0 || pm != 0);
  let zBase = (j - u.zPart) * u.D;

  // Pass 1: max, Σexp and argmax of z.
  var m = LOWEST;
  var s = 0.0;
  var idx = NO_INDEX;
  for (var v = lane; v < n; v += LANES) {
    let x = Z[zBase + v];
    if (x > m) {
      s = s * exp(m - x) + 1.0;
      m = x;
      idx = v;
    } else {
      s += exp(x - m);
    }
  }
  let stats = rowSoftmaxArgmax(m, s, idx, lane, slot);
  let zMax = stats.m;
  let zInv = 1.0 / stats.s;
  let pred = stats.idx;

  // Pass 2: α = Σ min(p̃, softmax(z)), only where the position mask counts it.
  let n2 = select(0u, u.D, pm != 0);
  let qBase = (rs - u.qPart) * u.D;
  var a = 0.0;
  for (var v = lane; v < n2; v += LANES) {
    a += min(Q[qBase + v], exp(Z[zBase + v] - zMax) * zInv);
  }
  let alpha = rowSumFinal(a, lane, slot);
  if (live && lane == 0u) {
    var hit = 0.0;
    if (n != 0u && used[pred] == tok) { hit = f32(lm); }
    let o = step * u.oStride + (r - u.oPart) * 4u;
    O[o] = hit;
    O[o + 1u] = f32(lm);
    O[o + 2u] = f32(pm) * alpha;
    O[o + 3u] = f32(pm);
  }
}
