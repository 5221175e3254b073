// include/soft-ce-row — the row body of loss/soft-ce in all three layouts (loss/soft-ce,
// loss/soft-ce-rows, loss/soft-ce-subgroup): the contract, Params, bindings and GRAD_MODE override
// of loss/soft-ce (EAGLE3 soft-target cross-entropy under the TTT shift k, its gradient,
// rowLoss[r] = m · CE[r]), written as processRow for include/row-reduce-{wide,tree,subgroup}
// (LANES, rowSumFinal, main) with include/loss-stats-{wide,lanes} (rowSoftmaxSum, LOWEST).
// Numerics: pass 1 keeps an online (max, Σexp) per lane and Σp over columns lane, lane + LANES, …,
// combined by rowSoftmaxSum. Pass 2 accumulates p·(lse − z), added by rowSumFinal, and writes the
// gradient. Rows with m = 0 never read z. Deterministic.
// Steps at once: row j = rowStart + i of Z is row r = j mod stepRows of TTT step k + s, s = j / stepRows
// (one step when stepRows is the step's row count), with its loss at L[s·lStride + r] and gradScale
// gradScales[s] (at most 16 steps per dispatch: LOSS_MAX_STEPS, src/kernels/loss.ts). Each
// row's arithmetic is the same as in a dispatch of its step alone.

struct Params {
  count: u32,
  rowStart: u32,
  D: u32,
  S: u32,
  k: u32,
  zPart: u32,
  pPart: u32,
  mPart: u32,
  gPart: u32,
  lPart: u32,
  stepRows: u32,
  lStride: u32,
  // gradScale of step s (its weight / (B·S)) at [s / 4][s % 4].
  gradScales: array<vec4<f32>, 4>,
}

override GRAD_MODE: u32 = 0u;

@group(0) @binding(0) var<uniform> u: Params;
@group(0) @binding(1) var<storage, read_write> Z: array<f32>;
@group(0) @binding(2) var<storage, read> P: array<f32>;
@group(0) @binding(3) var<storage, read> M: array<i32>;
@group(0) @binding(4) var<storage, read_write> G: array<f32>;
@group(0) @binding(5) var<storage, read_write> L: array<f32>;

fn rowCount() -> u32 { return u.count; }

fn processRow(i: u32, lane: u32, slot: u32) {
  let live = i < u.count;
  let j = u.rowStart + i;
  let step = j / u.stepRows;
  let r = j - step * u.stepRows;
  let k = u.k + step;
  let inSeq = (r % u.S) + k < u.S;
  var mask = 0;
  if (live && inSeq) { mask = M[r + k - u.mPart]; }
  let n = select(0u, u.D, mask != 0);
  let zBase = (j - u.zPart) * u.D;
  let pBase = (r + k - u.pPart) * u.D;

  // Pass 1: max and Σexp of z, and Σp.
  var m = LOWEST;
  var s = 0.0;
  var sp = 0.0;
  for (var v = lane; v < n; v += LANES) {
    let x = Z[zBase + v];
    if (x > m) {
      s = s * exp(m - x) + 1.0;
      m = x;
    } else {
      s += exp(x - m);
    }
    sp += P[pBase + v];
  }
  let stats = rowSoftmaxSum(m, s, sp, lane, slot);
  let lse = stats.x + log(stats.y);
  let pSum = stats.z;

  // Pass 2: CE partials and the gradient (zeros for masked rows, nothing for rows past the end).
  // A row past the end may lie past the last step's scale: only live rows read theirs.
  var g = 0.0;
  if (live) { g = f32(mask) * u.gradScales[step / 4u][step % 4u]; }
  let width = select(0u, u.D, live);
  var ce = 0.0;
  for (var v = lane; v < width; v += LANES) {
    var grad = 0.0;
    if (v < n) {
      let x = Z[zBase + v];
      let pv = P[pBase + v];
      ce += pv * (lse - x);
      grad = g * (pSum * exp(x - lse) - pv);
    }
    if (GRAD_MODE == 1u) { Z[zBase + v] = grad; }
    if (GRAD_MODE == 2u) { G[(j - u.gPart) * u.D + v] = grad; }
  }
  let rowCe = rowSumFinal(ce, lane, slot);
  if (live && lane == 0u) { L[step * u.lStride + r - u.lPart] = f32(mask) * rowCe; }
}
