// include/rmsnorm-dw-column — one column of an RMSNorm weight gradient, dw_col = Σ_rows dy · x · r,
// shared by rmsnorm/backward-dw-columns, rmsnorm/backward-subgroup-fused, rmsnorm/gather-backward-dw
// and rmsnorm/pair-backward-subgroup so all give the same bits for the same operands. `second` says
// which of the pair kernel's two norms the column is of (a constant at every call site, so each call is
// specialised after inlining; the one-norm kernels pass false). The including shader declares Params
// `p` (with rows) and provides
//   fn dwDy(r: u32, col: u32, second: bool) -> f32     element col of row r of dy
//   fn dwX(r: u32, col: u32, second: bool) -> f32      element col of row r of x (r < p.rows)
//   fn dwInvRms(r: u32, second: bool) -> f32           row r's saved 1/rms
// Numerics: f32 fma in increasing row order (one sequential sum per column; deterministic).

fn dwColumnSum(col: u32, second: bool) -> f32 {
  var g = 0.0;
  for (var r = 0u; r < p.rows; r++) {
    g = fma(dwDy(r, col, second), dwX(r, col, second) * dwInvRms(r, second), g);
  }
  return g;
}
