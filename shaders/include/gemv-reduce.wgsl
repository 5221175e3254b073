// include/gemv-reduce — the end of matmul/gemv and matmul/gemv-vec4 (their contract, bindings and
// dispatch are stated there): each lane's THREAD_N partial sums go to workgroup memory, a fixed tree
// adds the WG_X lanes' sums of each column (deterministic), and lanes 0..THREAD_N-1 store
// C[batch, col0 + lane] = alpha * sum + beta * C (beta == 0 never reads C; columns past N are not
// stored). The including shader declares Params `p` and C (array<f32>) before including this file;
// WG_X and THREAD_N are its geometry constants. Call it from uniform control flow (it has barriers).

// The reduction tree halves the lane count each level.
const_assert 0u == (WG_X & (WG_X - 1u));

var<workgroup> partial: array<f32, WG_X * THREAD_N>; // partial[lane * THREAD_N + j]

fn gemvReduceStore(lane: u32, col0: u32, batch: u32, acc: array<f32, THREAD_N>) {
  for (var j = 0u; j < THREAD_N; j++) { partial[lane * THREAD_N + j] = acc[j]; }
  workgroupBarrier();
  for (var s = WG_X / 2u; s > 0u; s = s / 2u) {
    if (lane < s) {
      for (var j = 0u; j < THREAD_N; j++) { partial[lane * THREAD_N + j] += partial[(lane + s) * THREAD_N + j]; }
    }
    workgroupBarrier();
  }

  if (lane < THREAD_N) {
    let col = col0 + lane;
    if (col < p.N) {
      let idx = batch * p.strideC + col;
      var v = p.alpha * partial[lane];
      if (p.beta != 0.0) { v += p.beta * C[idx]; }
      C[idx] = v;
    }
  }
}
