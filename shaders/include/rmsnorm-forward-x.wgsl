// include/rmsnorm-forward-x — x of rmsnorm/forward (all three layouts): the Params and binding 1 of
// rmsnorm/forward, and the x accessors include/rmsnorm-forward-row.wgsl reads through: row r of x
// starts at element r · strideX of the x binding. Its 1/rms goes to invRms[r], or, for rows in
// blocks of invBlockRows (several TTT steps' rows stacked), to invRms[(r / invBlockRows) ·
// invBlockStride + r mod invBlockRows]: each block's 1/rms on a binding boundary of its own.

struct Params {
  rows: u32,
  hidden: u32,
  strideX: u32,
  strideY: u32,
  eps: f32,
  invBlockRows: u32,
  invBlockStride: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;

fn xRowBase(row: u32) -> u32 { return row * p.strideX; }

fn xAt(base: u32, j: u32) -> f32 { return x[base + j]; }

fn invRmsIndex(row: u32) -> u32 {
  let block = row / p.invBlockRows;
  return block * p.invBlockStride + (row - block * p.invBlockRows);
}
