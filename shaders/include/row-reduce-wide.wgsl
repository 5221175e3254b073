// include/row-reduce-wide — the `wide` layout of the row kernels (src/kernels/row-variant.ts): one
// workgroup of LANES = 256 invocations per row (ROWS = 1), defined here rather than by the host,
// as the original kernels had it. Provides LANES, ROWS, rowSum / rowMax / rowMinU32 (each returns
// the row's value to every invocation; rowSumFinal, the same sum for a row body's last reduction)
// and the entry point `main`, which calls the including
// shader's
//   fn processRow(i: u32, lane: u32, slot: u32)
// for segment row i = wg.x + wg.y · num_workgroups.x (slot is always 0) and returns first for a
// workgroup past the end (the including shader's `fn rowCount() -> u32`); the same row bodies as
// include/row-reduce-{tree,subgroup}. The workgroup arrays are shared with include/loss-stats-wide.
// Numerics: rowSum is the fixed halving tree s[l] = s[l] + s[l + half], half = 128, …, 1 (the
// order of include/row-reduce-tree at LANES = 256); rowMax / rowMinU32 are exact. The last step,
// s[0] + s[1], is done by every invocation itself (the same operands in the same order, so the
// same bits), which saves its barrier; the barrier each reduction ends with lets the next one
// reuse the arrays (rowSumFinal, the last one, skips it). Barriers per reduction: 1 + 7 + 1.

const LANES: u32 = 256u;
const ROWS: u32 = 1u;

var<workgroup> redMax: array<f32, 256>;
var<workgroup> redSum: array<f32, 256>;
var<workgroup> redIdx: array<u32, 256>;

fn rowSum(v: f32, lane: u32, slot: u32) -> f32 {
  redSum[lane] = v;
  workgroupBarrier();
  for (var half = LANES / 2u; half > 1u; half = half >> 1u) {
    if (lane < half) { redSum[lane] = redSum[lane] + redSum[lane + half]; }
    workgroupBarrier();
  }
  let s = redSum[0] + redSum[1];
  workgroupBarrier();
  return s;
}

// rowSum for the last reduction of a row body: no closing barrier, since nothing reuses the array.
fn rowSumFinal(v: f32, lane: u32, slot: u32) -> f32 {
  redSum[lane] = v;
  workgroupBarrier();
  for (var half = LANES / 2u; half > 1u; half = half >> 1u) {
    if (lane < half) { redSum[lane] = redSum[lane] + redSum[lane + half]; }
    workgroupBarrier();
  }
  return redSum[0] + redSum[1];
}

fn rowMax(v: f32, lane: u32, slot: u32) -> f32 {
  redMax[lane] = v;
  workgroupBarrier();
  for (var half = LANES / 2u; half > 1u; half = half >> 1u) {
    if (lane < half) { redMax[lane] = max(redMax[lane], redMax[lane + half]); }
    workgroupBarrier();
  }
  let s = max(redMax[0], redMax[1]);
  workgroupBarrier();
  return s;
}

fn rowMinU32(v: u32, lane: u32, slot: u32) -> u32 {
  redIdx[lane] = v;
  workgroupBarrier();
  for (var half = LANES / 2u; half > 1u; half = half >> 1u) {
    if (lane < half) { redIdx[lane] = min(redIdx[lane], redIdx[lane + half]); }
    workgroupBarrier();
  }
  let s = min(redIdx[0], redIdx[1]);
  workgroupBarrier();
  return s;
}

@compute @workgroup_size(LANES, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wg.x + wg.y * nwg.x;
  if (i >= rowCount()) { return; }
  processRow(i, lid, 0u);
}
