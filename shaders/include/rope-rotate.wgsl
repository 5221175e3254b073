// include/rope-rotate — one rotate-half pair of RoPE, shared by rope/table, rope/qkv-split and
// rope/qkv-join so every layout rotates with the same bits:
//   (y1, y2) = (x1 · c − x2 · s, x2 · c + x1 · s)
// x1 and x2 are elements i and i + headDim/2 of one head; (c, s) is (cos, sin) of the pair's angle
// from the forward table, or (cos, −sin) from the inverse table (the backward: R is orthogonal,
// so dx = Rᵀ dy is the rotation by −angle).
// Numerics: f32 products and sums, as in HF's q·cos + rotate_half(q)·sin.

fn ropeRotatePair(x1: f32, x2: f32, c: f32, s: f32) -> vec2<f32> {
  return vec2<f32>(x1 * c - x2 * s, x2 * c + x1 * s);
}
