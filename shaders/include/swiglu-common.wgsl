// include/swiglu-common — the Params block (one layout for both passes, written by
// src/kernels/swiglu.ts) and the input bindings 0 uniform Params, 1 read gate, 2 read up; each pass
// declares its own bindings from 3 on. Included by swiglu/{forward,backward}.

struct Params {
  rows: u32,
  inter: u32,
  strideGate: u32,
  strideUp: u32,
  strideH: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
