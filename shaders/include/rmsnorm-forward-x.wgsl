// include/rmsnorm-forward-x — x of rmsnorm/forward (all three layouts): the Params and binding 1 of
// rmsnorm/forward, and the x accessors include/rmsnorm-forward-row.wgsl reads through: row r of x
// starts at element r · strideX of the x binding.

struct Params {
  rows: u32,
  hidden: u32,
  strideX: u32,
  strideY: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;

fn xRowBase(row: u32) -> u32 { return row * p.strideX; }

fn xAt(base: u32, j: u32) -> f32 { return x[base + j]; }
