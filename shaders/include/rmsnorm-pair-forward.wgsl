// include/rmsnorm-pair-forward — the bindings and rows of rmsnorm/pair-forward (all three layouts):
// segment rows [0, rows) are the gathered norm's (input_layernorm of embedding rows, as
// rmsnorm/gather-forward), rows [rows, 2·rows) the strided norm's (hidden_norm of x, as
// rmsnorm/forward), each run through the one row body (include/rmsnorm-norm-row.wgsl). Each layout's
// shader defines processRow: the wide and subgroup layouts through processRowUniform (a row is the same
// for the whole workgroup), the rows layout with `second` per invocation (a workgroup may hold rows of
// both norms, and every invocation must reach the reductions' barriers).
// Contract, shapes and bindings: rmsnorm/pair-forward.

struct Params {
  rows: u32,
  hidden: u32,
  strideX: u32,
  strideY: u32,
  eps: f32,
  seqLen: u32,
  shift: u32,
  vocab: u32,
}

override TABLE_F16: u32 = 0u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> table: array<u32>;
@group(0) @binding(2) var<storage, read> wEmb: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> invRmsEmb: array<f32>;
@group(0) @binding(5) var<storage, read> ids: array<i32>;
@group(0) @binding(6) var<storage, read> x: array<f32>;
@group(0) @binding(7) var<storage, read> wHidden: array<f32>;
@group(0) @binding(8) var<storage, read_write> invRmsHidden: array<f32>;

#include "include/rmsnorm-gathered-x.wgsl"

// The accessors of include/rmsnorm-norm-row: `second` is the strided (hidden) norm.
fn normRows() -> u32 { return p.rows; }

fn normXBase(row: u32, second: bool) -> u32 {
  if (second) { return row * p.strideX; }
  return gatheredRowBase(row);
}

fn normX(base: u32, j: u32, second: bool) -> f32 {
  if (second) { return x[base + j]; }
  return gatheredAt(base, j);
}

fn normW(j: u32, second: bool) -> f32 {
  if (second) { return wHidden[j]; }
  return wEmb[j];
}

// The strided norm's rows go to columns [hidden, 2·hidden) of y's rows.
fn normYIndex(row: u32, j: u32, second: bool) -> u32 { return row * p.strideY + select(0u, p.hidden, second) + j; }

fn normStoreInvRms(row: u32, r: f32, second: bool) {
  if (second) {
    invRmsHidden[row] = r;
  } else {
    invRmsEmb[row] = r;
  }
}

#include "include/rmsnorm-norm-row.wgsl"

fn rowCount() -> u32 { return 2u * p.rows; }

// Segment row i where it is uniform over the workgroup (the wide and subgroup layouts): one branch per
// norm, each calling the row body with a constant `second`, so each is specialised to its accessors.
fn processRowUniform(i: u32, lane: u32, slot: u32) {
  if (i >= p.rows) {
    normRow(i - p.rows, lane, slot, true);
  } else {
    normRow(i, lane, slot, false);
  }
}
