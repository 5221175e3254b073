// rmsnorm/pair-backward-subgroup — the backward of rmsnorm/pair-forward in one dispatch: hidden_norm's
// dx and dw (as rmsnorm/backward-subgroup-fused) and input_layernorm's dw from its embedding rows
// gathered again (as rmsnorm/gather-backward-dw; the table is frozen, so no dx). An EAGLE3 TTT step's
// two leading norms, whose gradient dz [rows, 2·hidden] holds input_layernorm's dy in columns
// [0, hidden) and hidden_norm's in [hidden, 2·hidden) (model/eagle3/backward.ts).
//
// Shapes: x (hidden_norm's input) at row stride strideX; dz at strideDy (≥ 2·hidden), bound twice: dy
//   from element hidden (hidden_norm's half; the host binds that view only where hidden · 4 bytes is on
//   the binding alignment) and dyEmb from element 0; dx at strideDx; w f32 [hidden]; invRms,
//   invRmsEmb f32 [rows]; ids i32 [rows], rows a multiple of seqLen; table [vocab, hidden], f32 or f16
//   (TABLE_F16), one binding (as rmsnorm/gather-backward-dw). The two weight gradients, f32 [hidden]
//   each, are one binding `dws` at elements dwOffset (hidden_norm's) and dwEmbOffset (input_layernorm's):
//   the optimizer's gradients share a buffer, and a written buffer is bound once per dispatch.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        x
//   2 storage read        w
//   3 storage read        dy (dz from element hidden)
//   4 storage read        invRms
//   5 storage read_write  dx
//   6 storage read_write  dws (both weight gradients)
//   7 storage read        table (u32 words)
//   8 storage read        ids
//   9 storage read        dyEmb (dz from element 0)
//   10 storage read       invRmsEmb
// Overrides: ACCUMULATE (dx), ACCUMULATE_DW (both weight gradients): false writes, true adds; TABLE_F16.
// Dispatch: ceil(rows / ROWS) + 2 · ceil(hidden / LANES) workgroups of LANES invocations (one subgroup;
//   the host uses this kernel only where the `subgroup` layout runs and the device binds its 10
//   storage buffers per stage), folded into (x, y): dx rows, then hidden_norm's dw columns, then
//   input_layernorm's. LANES and ROWS are RMSNORM_ROW_GEOMETRY.subgroup in src/kernels/rmsnorm.ts.
// Numerics: the same row and column bodies on the same operands as rmsnorm/backward-subgroup-fused
//   and rmsnorm/gather-backward-dw, so the same bits.
enable subgroups;

struct Params {
  rows: u32,
  hidden: u32,
  strideX: u32,
  strideDy: u32,
  strideDx: u32,
  seqLen: u32,
  shift: u32,
  vocab: u32,
  dwOffset: u32,
  dwEmbOffset: u32,
}

override ACCUMULATE: bool = false;
override ACCUMULATE_DW: bool = false;
override TABLE_F16: u32 = 0u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read> invRms: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;
@group(0) @binding(6) var<storage, read_write> dws: array<f32>;
@group(0) @binding(7) var<storage, read> table: array<u32>;
@group(0) @binding(8) var<storage, read> ids: array<i32>;
@group(0) @binding(9) var<storage, read> dyEmb: array<f32>;
@group(0) @binding(10) var<storage, read> invRmsEmb: array<f32>;

#include "include/rmsnorm-backward-dx-row.wgsl"
#include "include/row-reduce-subgroup-sums.wgsl"
#include "include/rmsnorm-gathered-x.wgsl"

// The dw columns' operands (include/rmsnorm-dw-column): `second` is input_layernorm's.
fn dwDy(r: u32, col: u32, second: bool) -> f32 {
  if (second) { return dyEmb[r * p.strideDy + col]; }
  return dy[r * p.strideDy + col];
}

fn dwX(r: u32, col: u32, second: bool) -> f32 {
  if (second) { return gatheredAt(gatheredRowBase(r), col); }
  return x[r * p.strideX + col];
}

fn dwInvRms(r: u32, second: bool) -> f32 {
  if (second) { return invRmsEmb[r]; }
  return invRms[r];
}

#include "include/rmsnorm-dw-column.wgsl"

@compute @workgroup_size(LANES, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let linear = wg.x + wg.y * nwg.x;
  let dxGroups = (p.rows + ROWS - 1u) / ROWS;
  if (linear < dxGroups) {
    processRowGroup(linear, lid);
    return;
  }
  let dwGroups = (p.hidden + LANES - 1u) / LANES;
  let column = linear - dxGroups;
  if (column < dwGroups) {
    let col = column * LANES + lid;
    if (col >= p.hidden) { return; }
    var g = dwColumnSum(col, false);
    if (ACCUMULATE_DW) { g += dws[p.dwOffset + col]; }
    dws[p.dwOffset + col] = g;
    return;
  }
  let col = (column - dwGroups) * LANES + lid;
  if (col >= p.hidden) { return; }
  var g = dwColumnSum(col, true);
  if (ACCUMULATE_DW) { g += dws[p.dwEmbOffset + col]; }
  dws[p.dwEmbOffset + col] = g;
}
