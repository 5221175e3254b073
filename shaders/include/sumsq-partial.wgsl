// include/sumsq-partial — what optim/sumsq and optim/sumsq-vec4 share: their Params block (written
// by globalGradNorm in src/kernels/optim.ts), the partials binding, and the fixed-shape halving tree
// that turns the WG invocations' sums into the workgroup's one partial. Each kernel declares its own
// g binding (binding 1) and sums its invocation's share of it before calling storePartial.
// Numerics: the tree adds in a fixed order (halving strides), so for a fixed grid the bits never change.

struct Params {
  // Elements of g: f32 elements in optim/sumsq, vec4 groups in optim/sumsq-vec4.
  n: u32,
  partialOffset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> partials: array<f32>;

// The halving tree below needs a power of two.
const_assert 0u == (WG & (WG - 1u));
var<workgroup> partial: array<f32, WG>;

// Every invocation calls this with its sum; invocation 0 then writes the workgroup's partial.
fn storePartial(lid: u32, wgIndex: u32, acc: f32) {
  partial[lid] = acc;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half = half / 2u) {
    if (lid < half) { partial[lid] = partial[lid] + partial[lid + half]; }
    workgroupBarrier();
  }
  if (lid == 0u) { partials[p.partialOffset + wgIndex] = partial[0]; }
}
