/**
 * Float64 reference for the SwiGLU gate on dense [rows, inter] arrays:
 *   h = silu(g) · u,  silu(g) = g · σ(g)
 *   du = dh · silu(g),  dg = dh · u · σ(g) · (1 + g · (1 − σ(g)))
 */
function sigmoid(g: number): number {
  return 1 / (1 + Math.exp(-g));
}

export function swigluForwardRef(gate: ArrayLike<number>, up: ArrayLike<number>): Float64Array {
  const h = new Float64Array(gate.length);
  for (let i = 0; i < gate.length; i++) h[i] = gate[i] * sigmoid(gate[i]) * up[i];
  return h;
}

export function swigluBackwardRef(
  gate: ArrayLike<number>,
  up: ArrayLike<number>,
  dh: ArrayLike<number>,
): { dgate: Float64Array; dup: Float64Array } {
  const dgate = new Float64Array(gate.length);
  const dup = new Float64Array(gate.length);
  for (let i = 0; i < gate.length; i++) {
    const g = gate[i];
    const s = sigmoid(g);
    dup[i] = dh[i] * g * s;
    dgate[i] = dh[i] * up[i] * s * (1 + g * (1 - s));
  }
  return { dgate, dup };
}
