// include/swiglu-math — the SwiGLU arithmetic of one element, shared by swiglu/forward, backward and
// their -packed layouts, so every layout gives the same bits:
//   h     = silu(g) · u,  silu(g) = g · σ(g),  σ(g) = 1 / (1 + exp(−g))
//   dup   = dh · silu(g)
//   dgate = dh · u · σ(g) · (1 + g · (1 − σ(g)))
// Numerics: f32; for g ≪ 0, exp(−g) overflows to +inf and σ(g) is exactly 0, the right limit (no NaN).

fn swigluSigmoid(g: f32) -> f32 {
  return 1.0 / (1.0 + exp(-g));
}

fn swigluForwardAt(g: f32, u: f32) -> f32 {
  return (g * swigluSigmoid(g)) * u;
}

// (dgate, dup) of one element.
fn swigluBackwardAt(g: f32, u: f32, d: f32) -> vec2<f32> {
  let sig = swigluSigmoid(g);
  return vec2<f32>((d * u) * (sig * (1.0 + g * (1.0 - sig))), d * (g * sig));
}
