// include/rmsnorm-backward-dx-params — the Params, ACCUMULATE override and bindings of rmsnorm/backward-dx
// (all three layouts, and rmsnorm/backward-subgroup-fused), which include/rmsnorm-backward-dx-row reads.

struct Params {
  rows: u32,
  hidden: u32,
  strideX: u32,
  strideDy: u32,
  strideDx: u32,
}

override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read> invRms: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;
