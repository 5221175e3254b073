// include/rmsnorm-dw-column — one column of the RMSNorm weight gradient, dw_col = Σ_rows dy · x · r,
// shared by rmsnorm/backward-dw-columns, rmsnorm/backward-subgroup-fused and
// rmsnorm/gather-backward-dw so all give the same bits for the same x. The including shader declares
// Params (rows, hidden, strideDy) as `p` and the storage arrays dy and invRms, and provides
//   fn dwX(r: u32, col: u32) -> f32      element col of row r of x (r < p.rows).
// Numerics: f32 fma in increasing row order (one sequential sum per column; deterministic).

fn dwColumnSum(col: u32) -> f32 {
  var g = 0.0;
  for (var r = 0u; r < p.rows; r++) {
    g = fma(dy[r * p.strideDy + col], dwX(r, col) * invRms[r], g);
  }
  return g;
}
