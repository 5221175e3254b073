// include/row-reduce-tree — the `rows` layout of the row kernels (src/kernels/row-variant.ts):
// a workgroup of LANES x ROWS invocations, invocation lid serving lane lid % LANES of row slot
// lid / LANES. Provides rowSum / rowMax / rowMinU32 (each returns the row's value to all of its
// lanes; rowSumFinal is rowSum for a row body's last reduction, without the closing barrier) and the entry point `main`, which calls the including shader's
//   fn processRow(i: u32, lane: u32, slot: u32)
// for segment row i = workgroup · ROWS + slot. Every invocation calls it, also for i past the end
// (the body must then read and write nothing), because the reductions contain barriers.
// LANES and ROWS come from the kernel module's geometry record as WGSL constants.
// Numerics: rowSum is a halving tree over the lanes, s[l] = s[l] + s[l + half] for half =
// LANES/2, …, 1 — fixed order, deterministic, and the same order as include/row-reduce-subgroup.
// rowMax / rowMinU32 are exact.

const_assert LANES >= 1u && (LANES & (LANES - 1u)) == 0u && ROWS >= 1u && LANES * ROWS <= 256u;

var<workgroup> rowRedF: array<f32, LANES * ROWS>;
var<workgroup> rowRedU: array<u32, LANES * ROWS>;

fn rowSum(v: f32, lane: u32, slot: u32) -> f32 {
  let base = slot * LANES;
  rowRedF[base + lane] = v;
  workgroupBarrier();
  for (var half = LANES / 2u; half > 0u; half = half >> 1u) {
    if (lane < half) { rowRedF[base + lane] = rowRedF[base + lane] + rowRedF[base + lane + half]; }
    workgroupBarrier();
  }
  let s = rowRedF[base];
  workgroupBarrier(); // the next reduction overwrites the slot
  return s;
}

// rowSum for the last reduction of a row body: no closing barrier, since nothing reuses the slot.
fn rowSumFinal(v: f32, lane: u32, slot: u32) -> f32 {
  let base = slot * LANES;
  rowRedF[base + lane] = v;
  workgroupBarrier();
  for (var half = LANES / 2u; half > 0u; half = half >> 1u) {
    if (lane < half) { rowRedF[base + lane] = rowRedF[base + lane] + rowRedF[base + lane + half]; }
    workgroupBarrier();
  }
  return rowRedF[base];
}

fn rowMax(v: f32, lane: u32, slot: u32) -> f32 {
  let base = slot * LANES;
  rowRedF[base + lane] = v;
  workgroupBarrier();
  for (var half = LANES / 2u; half > 0u; half = half >> 1u) {
    if (lane < half) { rowRedF[base + lane] = max(rowRedF[base + lane], rowRedF[base + lane + half]); }
    workgroupBarrier();
  }
  let s = rowRedF[base];
  workgroupBarrier();
  return s;
}

fn rowMinU32(v: u32, lane: u32, slot: u32) -> u32 {
  let base = slot * LANES;
  rowRedU[base + lane] = v;
  workgroupBarrier();
  for (var half = LANES / 2u; half > 0u; half = half >> 1u) {
    if (lane < half) { rowRedU[base + lane] = min(rowRedU[base + lane], rowRedU[base + lane + half]); }
    workgroupBarrier();
  }
  let s = rowRedU[base];
  workgroupBarrier();
  return s;
}

@compute @workgroup_size(LANES * ROWS, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let slot = lid / LANES;
  processRow((wg.x + wg.y * nwg.x) * ROWS + slot, lid % LANES, slot);
}
