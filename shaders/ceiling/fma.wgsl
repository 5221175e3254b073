// ceiling/fma — the adapter's fused multiply-add rate, with no memory traffic in the loop: each
// invocation runs CHAINS independent vec4 recurrences x ← fma(x, a, b) for `iters` steps entirely in
// registers, then stores one sum (so the compiler keeps the work). bench/ceiling.ts divides the
// FLOPs (2 per lane per fma: invocations × iters × CHAINS × 4 × 2) by the time: the ceiling every
// matmul, GEMV and step figure is given as a fraction of.
//
// Shapes: out f32 [invocations], invocations = workgroups × WG.
// Bindings (group 0): 0 uniform Params { iters, a, b }, 1 read_write out array<f32>.
// Dispatch: (workgroups, 1, 1) workgroups of WG invocations; invocation g writes out[g].
// WG and CHAINS are CEILING_GEOMETRY in src/kernels/ceiling.ts, appended as constants.
// Numerics: chain c of invocation g starts at x = f32(g % 7) + 0.25·c + (0, 1, 2, 3)/8; each step is
//   one correctly rounded f32 fma; the store is the sum of the chains' components in chain order,
//   lane x, y, z, w within a chain. With |a| < 1 the recurrence converges to b / (1 − a), so nothing
//   overflows. src/reference/ceiling.ts steps the same values in float64 rounded to f32; WGSL lets an
//   implementation leave fma unfused, so a step may round once more: within one f32 ulp per step.

struct Params {
  iters: u32,
  a: f32,
  b: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let g = gid.x;
  let base = f32(g % 7u) + vec4<f32>(0.0, 0.125, 0.25, 0.375);
  var x: array<vec4<f32>, CHAINS>;
  for (var c = 0u; c < CHAINS; c++) { x[c] = base + vec4<f32>(0.25 * f32(c)); }
  let a = vec4<f32>(p.a);
  let b = vec4<f32>(p.b);
  for (var i = 0u; i < p.iters; i++) {
    for (var c = 0u; c < CHAINS; c++) { x[c] = fma(x[c], a, b); }
  }
  var s = 0.0;
  for (var c = 0u; c < CHAINS; c++) { s = s + x[c].x + x[c].y + x[c].z + x[c].w; }
  out[g] = s;
}
