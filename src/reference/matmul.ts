/**
 * Float64 reference for matmul: C = alpha · op(A) · op(B) + beta · C, with the same storage
 * conventions as the WGSL kernels (A [M,K] or [K,M] if transA; B [K,N] or [N,K] if transB).
 */
export interface RefMatmulArgs {
  M: number;
  N: number;
  K: number;
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
  beta?: number;
  batch?: number;
  strideA?: number;
  strideB?: number;
  strideC?: number;
}

export function matmulRef(a: ArrayLike<number>, b: ArrayLike<number>, c: ArrayLike<number> | undefined, args: RefMatmulArgs): Float64Array {
  const { M, N, K, transA = false, transB = false, alpha = 1, beta = 0, batch = 1 } = args;
  const strideA = args.strideA ?? M * K;
  const strideB = args.strideB ?? K * N;
  const strideC = args.strideC ?? M * N;
  const out = new Float64Array(strideC * (batch - 1) + M * N);
  if (c) for (let i = 0; i < out.length; i++) out[i] = c[i];
  for (let bi = 0; bi < batch; bi++) {
    const oa = bi * strideA;
    const ob = bi * strideB;
    const oc = bi * strideC;
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let sum = 0;
        for (let k = 0; k < K; k++) {
          const av = transA ? a[oa + k * M + m] : a[oa + m * K + k];
          const bv = transB ? b[ob + n * K + k] : b[ob + k * N + n];
          sum += av * bv;
        }
        const idx = oc + m * N + n;
        out[idx] = alpha * sum + (beta !== 0 ? beta * out[idx] : 0);
      }
    }
  }
  return out;
}
