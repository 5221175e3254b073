// include/rmsnorm-forward-row — one RMSNorm over one x for rmsnorm/forward in all three layouts
// (rmsnorm/forward, forward-rows, forward-subgroup) and rmsnorm/gather-forward (the same three): the
// bindings of w, y and invRms, and processRow for include/row-reduce-{wide,tree,subgroup} running
// the row body of include/rmsnorm-norm-row.wgsl (y = w ⊙ x / sqrt(mean(x²) + eps), invRms saved).
// Where x comes from is the including shader's: it declares Params `p` (with rows, hidden, strideY
// and eps) and x's binding, and provides
//   fn xRowBase(row: u32) -> u32        where row `row` of x starts (only called for row < p.rows)
//   fn xAt(base: u32, j: u32) -> f32     element j of the row that starts at base
//   fn invRmsIndex(row: u32) -> u32      where row `row`'s 1/rms goes in invRms
// (include/rmsnorm-forward-x.wgsl: x at a row stride; include/rmsnorm-gather-forward-x.wgsl: embedding rows).
// Bindings declared here (group 0): 2 read w, 3 read_write y, 4 read_write invRms.
// Numerics: include/rmsnorm-norm-row's.

@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> invRms: array<f32>;

// One norm: `second` is always false.
fn normRows() -> u32 { return p.rows; }
fn normXBase(row: u32, second: bool) -> u32 { return xRowBase(row); }
fn normX(base: u32, j: u32, second: bool) -> f32 { return xAt(base, j); }
fn normW(j: u32, second: bool) -> f32 { return w[j]; }
fn normYIndex(row: u32, j: u32, second: bool) -> u32 { return row * p.strideY + j; }
fn normStoreInvRms(row: u32, r: f32, second: bool) { invRms[invRmsIndex(row)] = r; }

#include "include/rmsnorm-norm-row.wgsl"

fn rowCount() -> u32 { return p.rows; }

fn processRow(row: u32, lane: u32, slot: u32) { normRow(row, lane, slot, false); }
