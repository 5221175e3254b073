/**
 * Float64 reference for RMSNorm (LlamaRMSNorm) on dense [rows, hidden] arrays:
 *   y = w ⊙ x · r,  r = 1 / sqrt(mean(x²) + eps)
 *   dx = r · (dy ⊙ w) − x · r³ · (Σ dy ⊙ w ⊙ x) / hidden,  dw = Σ_rows dy ⊙ x · r
 */
export interface RefRmsnormArgs {
  rows: number;
  hidden: number;
  eps: number;
}

export function rmsnormForwardRef(
  x: ArrayLike<number>,
  w: ArrayLike<number>,
  args: RefRmsnormArgs,
): { y: Float64Array; invRms: Float64Array } {
  const { rows, hidden, eps } = args;
  const y = new Float64Array(rows * hidden);
  const invRms = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let sumSq = 0;
    for (let j = 0; j < hidden; j++) sumSq += x[r * hidden + j] ** 2;
    const inv = 1 / Math.sqrt(sumSq / hidden + eps);
    invRms[r] = inv;
    for (let j = 0; j < hidden; j++) y[r * hidden + j] = w[j] * x[r * hidden + j] * inv;
  }
  return { y, invRms };
}

export function rmsnormBackwardRef(
  x: ArrayLike<number>,
  w: ArrayLike<number>,
  dy: ArrayLike<number>,
  args: RefRmsnormArgs,
): { dx: Float64Array; dw: Float64Array } {
  const { rows, hidden } = args;
  const { invRms } = rmsnormForwardRef(x, w, args);
  const dx = new Float64Array(rows * hidden);
  const dw = new Float64Array(hidden);
  for (let r = 0; r < rows; r++) {
    const inv = invRms[r];
    let dot = 0;
    for (let j = 0; j < hidden; j++) dot += dy[r * hidden + j] * w[j] * x[r * hidden + j];
    for (let j = 0; j < hidden; j++) {
      const i = r * hidden + j;
      dx[i] = inv * dy[i] * w[j] - (x[i] * inv ** 3 * dot) / hidden;
      dw[j] += dy[i] * x[i] * inv;
    }
  }
  return { dx, dw };
}
