// rmsnorm/gather-backward-dw — the weight gradient of rmsnorm/gather-forward: dw_j = Σ_rows dy_j ·
// x_j · r_row with x[r] = table[ids'[r]] gathered again (include/rmsnorm-gathered-x), so neither the
// gathered rows nor a dx of the frozen table exist. The EAGLE3 draft's input_layernorm weight
// gradient of a TTT step (model/eagle3/backward.ts).
//
// Shapes: ids i32 [N] (as rmsnorm/gather-forward); table [vocab, hidden], f32 or f16 (TABLE_F16),
//   one binding; dy at row stride strideDy (≥ hidden); invRms f32 [rows]; dw f32 [hidden].
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        table (u32 words)
//   2 storage read        dy
//   3 storage read        invRms
//   4 storage read_write  dw
//   5 storage read        ids
// Overrides: ACCUMULATE (false writes dw, true adds into it); TABLE_F16 (0 f32 table, 1 f16).
// Dispatch: ceil(hidden / WG_X) workgroups of WG_X; invocation lx owns column wg.x · WG_X + lx (as
//   rmsnorm/backward-dw-columns). WG_X is RMSNORM_DW_COLUMNS_LANES in src/kernels/rmsnorm.ts,
//   appended as a constant; the host's grid uses the same value.
// Numerics: include/rmsnorm-dw-column (f32 fma in increasing row order; deterministic): the bits of
//   embedding/gather followed by rmsnorm/backward-dw-columns or backward-subgroup-fused's dw.

struct Params {
  rows: u32,
  hidden: u32,
  strideDy: u32,
  seqLen: u32,
  shift: u32,
  vocab: u32,
}

override ACCUMULATE: bool = false;
override TABLE_F16: u32 = 0u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> table: array<u32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read> invRms: array<f32>;
@group(0) @binding(4) var<storage, read_write> dw: array<f32>;
@group(0) @binding(5) var<storage, read> ids: array<i32>;

#include "include/rmsnorm-gathered-x.wgsl"

fn dwX(r: u32, col: u32, second: bool) -> f32 { return gatheredAt(gatheredRowBase(r), col); }

#include "include/rmsnorm-dw-columns-main.wgsl"
