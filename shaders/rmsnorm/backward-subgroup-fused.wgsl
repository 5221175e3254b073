// rmsnorm/backward-subgroup-fused — rmsnorm/backward-dx-subgroup and rmsnorm/backward-dw-columns in
// one dispatch. dx and dw read the same inputs and neither reads the other's output, so the first
// ceil(rows / ROWS) workgroups do dx (as backward-dx-subgroup: one LANES-lane subgroup reducing ROWS
// rows in turn) and the next ceil(hidden / LANES) do dw (as backward-dw-columns: one lane per column
// summing every row). Where launches dominate (a small draft's step, 4 norms per TTT step) this
// halves the norms' backward dispatches.
// Contract of dx: include/rmsnorm-backward-dx-row.wgsl; of dw: include/rmsnorm-dw-column.wgsl.
// Shapes: x at row stride strideX, dy at strideDy, dx at strideDx (each ≥ hidden); w f32 [hidden];
//   invRms f32 [rows]; dw f32 [hidden].
// Bindings (group 0): 0 uniform Params, 1 read x, 2 read w, 3 read dy, 4 read invRms,
//   5 read_write dx, 6 read_write dw.
// Overrides: ACCUMULATE (dx) and ACCUMULATE_DW: false writes, true adds into the output.
// Dispatch: ceil(rows / ROWS) + ceil(hidden / LANES) workgroups of LANES invocations (one subgroup;
//   the host uses this kernel only where the `subgroup` layout runs), folded into (x, y); LANES and
//   ROWS are RMSNORM_ROW_GEOMETRY.subgroup in src/kernels/rmsnorm.ts, appended as constants.
// Numerics: the same bits as the two kernels it joins (the same row bodies, the same sums).
enable subgroups;

#include "include/rmsnorm-backward-dx-params.wgsl"
#include "include/rmsnorm-backward-dx-row.wgsl"
#include "include/row-reduce-subgroup-sums.wgsl"
// The dw columns' operands (include/rmsnorm-dw-column; one norm, so `second` is false).
fn dwDy(r: u32, col: u32, second: bool) -> f32 { return dy[r * p.strideDy + col]; }
fn dwX(r: u32, col: u32, second: bool) -> f32 { return x[r * p.strideX + col]; }
fn dwInvRms(r: u32, second: bool) -> f32 { return invRms[r]; }

#include "include/rmsnorm-dw-column.wgsl"

override ACCUMULATE_DW: bool = false;

@group(0) @binding(6) var<storage, read_write> dw: array<f32>;

@compute @workgroup_size(LANES, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let linear = wg.x + wg.y * nwg.x;
  let dxGroups = (p.rows + ROWS - 1u) / ROWS;
  if (linear < dxGroups) {
    processRowGroup(linear, lid);
    return;
  }
  let col = (linear - dxGroups) * LANES + lid;
  if (col >= p.hidden) { return; }
  var g = dwColumnSum(col, false);
  if (ACCUMULATE_DW) { g += dw[col]; }
  dw[col] = g;
}
