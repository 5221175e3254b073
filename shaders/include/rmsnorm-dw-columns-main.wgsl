// include/rmsnorm-dw-columns-main — the entry point of rmsnorm/backward-dw-columns and
// rmsnorm/gather-backward-dw: invocation lx of workgroup wg.x owns column wg.x · WG_X + lx and writes
// (ACCUMULATE: adds) its dwColumnSum (include/rmsnorm-dw-column.wgsl, included here). The including
// shader declares Params `p` (rows, hidden, strideDy), dy, invRms, dw (array<f32>, read_write), the
// override ACCUMULATE, the constant WG_X, and fn dwX.

#include "include/rmsnorm-dw-column.wgsl"

@compute @workgroup_size(WG_X, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let col = wg.x * WG_X + lid.x;
  if (col >= p.hidden) { return; }
  var g = dwColumnSum(col);
  if (ACCUMULATE) { g += dw[col]; }
  dw[col] = g;
}
