// optim/scale — g *= coef[1] in place: applies the clip coefficient of optim/finalize without a
// readback.
//
// Shapes: g f32 [n] (one tensor or one row part); coef f32 [≥ 2] (result of optim/finalize).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        coef
//   2 storage read_write  g
// Dispatch: ceil(n / WG) workgroups of WG, folded into (x, y); one invocation per element.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: one f32 multiply per element (torch multiplies by the clamped coefficient too); the
//   skip sentinel coef = -1 (non-finite norm, optim/finalize) writes 0.

struct Params {
  n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> coef: array<f32>;
@group(0) @binding(2) var<storage, read_write> g: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (i >= p.n) { return; }
  // coef < 0 is the skip sentinel of a non-finite norm: the step's gradients are dropped.
  g[i] = select(g[i] * coef[1], 0.0, coef[1] < 0.0);
}
