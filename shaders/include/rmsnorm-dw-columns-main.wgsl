// include/rmsnorm-dw-columns-main — the entry point of rmsnorm/backward-dw-columns and
// rmsnorm/gather-backward-dw: invocation lx of workgroup wg.x owns column wg.x · WG_X + lx and writes
// (ACCUMULATE: adds) its dwColumnSum (include/rmsnorm-dw-column.wgsl, included here). The including
// shader declares Params `p` (rows, hidden, strideDy), dy, invRms, dw (array<f32>, read_write), the
// override ACCUMULATE, the constant WG_X, and fn dwX (include/rmsnorm-dw-column's; `second` is false).

// One norm: dy at its row stride, invRms per row.
fn dwDy(r: u32, col: u32, second: bool) -> f32 { return dy[r * p.strideDy + col]; }
fn dwInvRms(r: u32, second: bool) -> f32 { return invRms[r]; }

#include "include/rmsnorm-dw-column.wgsl"

@compute @workgroup_size(WG_X, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let col = wg.x * WG_X + lid.x;
  if (col >= p.hidden) { return; }
  var g = dwColumnSum(col, false);
  if (ACCUMULATE) { g += dw[col]; }
  dw[col] = g;
}
