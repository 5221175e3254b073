// optim/adamw — one fused AdamW step on f32 master weights (PyTorch AdamW, foreach=False):
//   g  = grad · coef[1]                  (only with USE_CLIP: the clip coefficient from the GPU;
//                                         coef[1] < 0 is optim/finalize's skip sentinel for a
//                                         non-finite gradient norm: nothing is written)
//   p  = p · (1 − lr · wd)               (decoupled weight decay)
//   m  = m + (1 − β1) · (g − m)          (torch lerp_, same as β1 m + (1 − β1) g)
//   v  = β2 v + (1 − β2) g²
//   p  = p − stepSize · m / (sqrt(v) / sqrt(1 − β2^t) + eps),  stepSize = lr / (1 − β1^t)
// The host computes the scalars (decay, stepSize, bc2Sqrt) in float64, as PyTorch does in Python.
//
// Shapes: grad, param, m, v: f32 [n] (one tensor or one row part); clip f32 [≥ 2] (result of
//   optim/finalize; with USE_CLIP = false the host binds grad there and it is not read).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        grad
//   2 storage read        clip
//   3 storage read_write  param
//   4 storage read_write  m
//   5 storage read_write  v
// Dispatch: ceil(n / WG) workgroups of WG, folded into (x, y); one invocation per element.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: f32 throughout, in the operation order above.

struct Params {
  n: u32,
  decay: f32,
  oneMinusBeta1: f32,
  beta2: f32,
  oneMinusBeta2: f32,
  stepSize: f32,
  bc2Sqrt: f32,
  eps: f32,
}

override USE_CLIP: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read> clip: array<f32>;
@group(0) @binding(3) var<storage, read_write> param: array<f32>;
@group(0) @binding(4) var<storage, read_write> m: array<f32>;
@group(0) @binding(5) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (i >= p.n) { return; }
  if (USE_CLIP && clip[1] < 0.0) { return; }
  var g = grad[i];
  if (USE_CLIP) { g = g * clip[1]; }
  let decayed = param[i] * p.decay;
  let mi = m[i] + p.oneMinusBeta1 * (g - m[i]);
  let vi = v[i] * p.beta2 + p.oneMinusBeta2 * g * g;
  m[i] = mi;
  v[i] = vi;
  let denom = sqrt(vi) / p.bc2Sqrt + p.eps;
  param[i] = decayed - p.stepSize * (mi / denom);
}
