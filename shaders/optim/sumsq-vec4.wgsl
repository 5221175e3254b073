// optim/sumsq-vec4 — optim/sumsq reading four elements per load: the same per-workgroup partial
// sums of g², over g read as vec4<f32>. One 16-byte load where the scalar kernel makes four: on a
// CPU adapter every per-invocation access is its own load (bench/RESULTS.md, "Fewer barriers, wider
// loads"). The host takes it when the element count is a multiple of 4 (parameter slabs are padded
// to 16 bytes, optim/parameter-arena.ts) and the part's byte offset a multiple of 16 (storage
// binding offsets are multiples of 256).
//
// Shapes: g f32 [4 · n] read as vec4 [n] (p.n counts vec4 groups); partials f32, of which this
//   dispatch writes partials[partialOffset + w] for each of its workgroups w.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        g
//   2 storage read_write  partials
// Dispatch: G workgroups of WG in x (G chosen by the host from the element count, as for
//   optim/sumsq). Invocation lid of workgroup w sums the squares of the lanes x, y, z, w of g[i] for
//   i = w·WG + lid, then i += G·WG (grid stride), in increasing i. WG is SUMSQ_WG in
//   src/kernels/optim.ts, appended to this source as a constant.
// Numerics: f32 accumulation, then the fixed-shape tree of include/sumsq-partial.wgsl. G is fixed by
//   the host from the element count alone, and the count picks the kernel, so the bits never change
//   for a model.

#include "include/sumsq-partial.wgsl"

@group(0) @binding(1) var<storage, read> g: array<vec4<f32>>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let step = nwg.x * WG;
  var acc = 0.0;
  for (var i = wg.x * WG + lid.x; i < p.n; i += step) {
    let v = g[i];
    acc = fma(v.x, v.x, acc);
    acc = fma(v.y, v.y, acc);
    acc = fma(v.z, v.z, acc);
    acc = fma(v.w, v.w, acc);
  }
  storePartial(lid.x, wg.x, acc);
}
