// include/matmul-tile-loads — bounds-checked f32 loads of op(A)[m, k] and op(B)[k, n] in either
// storage layout, 0 outside the matrix, so the staged tiles need not divide M, N or K. Uses p, A,
// B, TRANS_A and TRANS_B from include/matmul-common. Included by include/matmul-tile (the body of
// matmul/{tiled,tiled-f16}).

fn loadA(base: u32, m: u32, k: u32) -> f32 {
  if (m >= p.M || k >= p.K) { return 0.0; }
  if (TRANS_A) { return A[base + k * p.M + m]; }
  return A[base + m * p.K + k];
}

fn loadB(base: u32, k: u32, n: u32) -> f32 {
  if (k >= p.K || n >= p.N) { return 0.0; }
  if (TRANS_B) { return bAt(base + n * p.K + k); }
  return bAt(base + k * p.N + n);
}
