// include/rmsnorm-dw-column — one column of the RMSNorm weight gradient, dw_col = Σ_rows dy · x · r,
// shared by rmsnorm/backward-dw-columns and rmsnorm/backward-subgroup-fused so both give the same
// bits. The including shader declares Params (rows, hidden, strideX, strideDy) as `p` and the
// storage arrays x, dy and invRms.
// Numerics: f32 fma in increasing row order (one sequential sum per column; deterministic).

fn dwColumnSum(col: u32) -> f32 {
  var g = 0.0;
  for (var r = 0u; r < p.rows; r++) {
    g = fma(dy[r * p.strideDy + col], x[r * p.strideX + col] * invRms[r], g);
  }
  return g;
}
