// include/adamw-update — the AdamW arithmetic of one element, shared by optim/adamw and
// optim/adamw-vec4 so both layouts give the same bits, and the Params block both read (one layout,
// written by adamwStep in src/kernels/optim.ts):
//   g  = grad · coef                     (the caller passes coef = 1 without clipping)
//   p  = p · (1 − lr · wd)               (decoupled weight decay)
//   m  = m + (1 − β1) · (g − m)          (torch lerp_, same as β1 m + (1 − β1) g)
//   v  = β2 v + (1 − β2) g²
//   p  = p − stepSize · m / (sqrt(v) / sqrt(1 − β2^t) + eps),  stepSize = lr / (1 − β1^t)
// Numerics: f32 throughout, in the operation order above.

struct Params {
  // Elements of the dispatch: f32 elements in optim/adamw, vec4 groups of 4 in optim/adamw-vec4.
  n: u32,
  decay: f32,
  oneMinusBeta1: f32,
  beta2: f32,
  oneMinusBeta2: f32,
  stepSize: f32,
  bc2Sqrt: f32,
  eps: f32,
}

// (param, m, v) after one update of one element; `g` is already clipped.
fn adamwUpdate(q: Params, g: f32, param: f32, m: f32, v: f32) -> vec3<f32> {
  let decayed = param * q.decay;
  let mi = m + q.oneMinusBeta1 * (g - m);
  let vi = v * q.beta2 + q.oneMinusBeta2 * g * g;
  let denom = sqrt(vi) / q.bc2Sqrt + q.eps;
  return vec3<f32>(decayed - q.stepSize * (mi / denom), mi, vi);
}
