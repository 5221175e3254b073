/**
 * Float64 reference for rotary position embedding, HF LLaMA rotate-half convention, on dense
 * [rows, nHeads, headDim] arrays:
 *   rotate_half(v) = [−v[half:], v[:half]],  y = x · cos + rotate_half(x) · sin
 * with cos/sin of angle pos · theta^(−2i/headDim) repeated over both halves (as HF's
 * `emb = cat(freqs, freqs)`). The backward rotates by the opposite angle.
 */
export interface RefRopeArgs {
  rows: number;
  nHeads: number;
  headDim: number;
  theta: number;
  posOffset?: number;
}

function rotate(x: ArrayLike<number>, positions: ArrayLike<number>, args: RefRopeArgs, sign: 1 | -1): Float64Array {
  const { rows, nHeads, headDim, theta, posOffset = 0 } = args;
  const half = headDim / 2;
  const y = new Float64Array(rows * nHeads * headDim);
  for (let r = 0; r < rows; r++) {
    const pos = positions[r] + posOffset;
    for (let h = 0; h < nHeads; h++) {
      const base = (r * nHeads + h) * headDim;
      for (let j = 0; j < headDim; j++) {
        const i = j % half;
        const angle = sign * pos * theta ** (-(2 * i) / headDim);
        const rotated = j < half ? -x[base + j + half] : x[base + j - half];
        y[base + j] = x[base + j] * Math.cos(angle) + rotated * Math.sin(angle);
      }
    }
  }
  return y;
}

export function ropeForwardRef(x: ArrayLike<number>, positions: ArrayLike<number>, args: RefRopeArgs): Float64Array {
  return rotate(x, positions, args, 1);
}

/** Gradient of ropeForwardRef: the transpose of the rotation, i.e. the rotation by −angle. */
export function ropeBackwardRef(dy: ArrayLike<number>, positions: ArrayLike<number>, args: RefRopeArgs): Float64Array {
  return rotate(dy, positions, args, -1);
}
