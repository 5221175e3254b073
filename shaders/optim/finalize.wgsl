// optim/finalize — pass 2 of the global gradient L2 norm, and the clip coefficient:
//   norm = sqrt(Σ partials),  coef = min(1, maxNorm / (norm + 1e-6))   (torch clip_grad_norm_)
//
// Shapes: partials f32 [count] from optim/sumsq; result f32 [≥ 2]: result[0] = norm,
//   result[1] = coef. Both stay on the GPU: clipping and AdamW read result[1] there.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        partials
//   2 storage read_write  result
// Dispatch: exactly one workgroup of 256.
// Numerics: f32; invocation lid sums partials lid, lid + 256, ... in order, then a fixed tree
//   (deterministic). maxNorm = +inf gives coef 1. A NaN or infinite norm (a diverged step) gives
//   coef = -1, the skip sentinel: optim/adamw then leaves weights and moments untouched and
//   optim/scale zeroes the gradients, where torch would propagate the NaN into every weight.

struct Params {
  count: u32,
  maxNorm: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> result: array<f32>;

#include "include/tree-sum-256.wgsl"

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  var acc = 0.0;
  for (var i = lid.x; i < p.count; i += WG) { acc += partials[i]; }
  partial[lid.x] = acc;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half = half / 2u) {
    if (lid.x < half) { partial[lid.x] = partial[lid.x] + partial[lid.x + half]; }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    let norm = sqrt(partial[0]);
    result[0] = norm;
    // Exponent all ones: inf or NaN (a bit test, since x != x may be folded away).
    let nonFinite = (bitcast<u32>(norm) & 0x7f800000u) == 0x7f800000u;
    result[1] = select(min(1.0, p.maxNorm / (norm + 1e-6)), -1.0, nonFinite);
  }
}
