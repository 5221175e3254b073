// include/rmsnorm-gather-forward-x — x of rmsnorm/gather-forward (all three layouts): its Params and
// bindings 0, 1 and 5, and x read from the embedding table (include/rmsnorm-gathered-x.wgsl).
// TABLE_F16 is a pipeline override: 0 for an f32 table, 1 for f16 pairs in u32 words.

struct Params {
  rows: u32,
  hidden: u32,
  strideY: u32,
  eps: f32,
  seqLen: u32,
  shift: u32,
  vocab: u32,
}

override TABLE_F16: u32 = 0u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> table: array<u32>;
@group(0) @binding(5) var<storage, read> ids: array<i32>;

#include "include/rmsnorm-gathered-x.wgsl"

fn xRowBase(row: u32) -> u32 { return gatheredRowBase(row); }
fn xAt(base: u32, j: u32) -> f32 { return gatheredAt(base, j); }
fn invRmsIndex(row: u32) -> u32 { return row; }
