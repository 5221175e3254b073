// optim/sumsq — pass 1 of the global gradient L2 norm: per-workgroup partial sums of g².
//
// Shapes: g f32 [n] (one tensor, or one row part of it); partials f32, of which this dispatch
//   writes partials[partialOffset + w] for each of its workgroups w.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        g
//   2 storage read_write  partials
// Dispatch: G workgroups of WG in x (G chosen by the host, ≤ 65535). Invocation lid of workgroup
//   w sums g[i]² for i = w·WG + lid, then i += G·WG (grid stride), in increasing i. WG is
//   SUMSQ_WG in src/kernels/optim.ts, appended to this source as a constant; the host derives G
//   from n with the same value.
// Numerics: f32 accumulation, then the fixed-shape tree of include/sumsq-partial.wgsl. With G
//   fixed by the host from n alone, the summation order, hence the result bits, never change.

#include "include/sumsq-partial.wgsl"

@group(0) @binding(1) var<storage, read> g: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let step = nwg.x * WG;
  var acc = 0.0;
  for (var i = wg.x * WG + lid.x; i < p.n; i += step) {
    let v = g[i];
    acc = fma(v, v, acc);
  }
  storePartial(lid.x, wg.x, acc);
}
