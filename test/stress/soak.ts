/**
 * Soak: mixed matmul sizes up to 2048 for a fixed wall time, allocating and releasing between
 * submits; every small product is checked against the float64 reference and every large one against
 * a row checksum, so a crash, a hang or silently wrong results all fail the soak.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import type { GpuContext } from '../../src/gpu/context.ts';
import { matmul } from '../../src/kernels/matmul.ts';
import { matmulRef } from '../../src/reference/matmul.ts';
import { Rng } from '../../src/util/random.ts';
import { relativeError } from '../harness/assert.ts';

const SIZES = [64, 96, 256, 384, 512, 1024, 2048];

export interface SoakResult {
  iterations: number;
  seconds: number;
  largest: number;
  worstRelErr: number;
}

export async function soak(ctx: GpuContext, seconds: number, onGarbage?: () => void): Promise<SoakResult> {
  const gpu = new Gpu(ctx);
  const rng = new Rng(99);
  const start = performance.now();
  let iterations = 0;
  let largest = 0;
  let worst = 0;
  let sizeIndex = 0;
  while ((performance.now() - start) / 1000 < seconds || iterations < SIZES.length) {
    const n = SIZES[sizeIndex++ % SIZES.length];
    const [M, N, K] = [n, n - (iterations % 7), n + (iterations % 5)];
    const a = rng.floats(M * K);
    const b = rng.floats(K * N);
    const A = gpu.upload([M * K], 'f32', a);
    const B = gpu.upload([K * N], 'f32', b);
    const C = gpu.tensor([M * N], 'f32');
    await matmul(gpu, A, B, C, { M, N, K }, { transB: iterations % 2 === 1 });
    // Allocate garbage between submit and readback while the GPU works.
    const junk = Array.from({ length: 2000 }, (_, i) => ({ i, s: `x${i}` }));
    onGarbage?.();
    const got = await gpu.read(C);
    if (n <= 256) {
      worst = Math.max(worst, relativeError(got, matmulRef(a, b, undefined, { M, N, K, transB: iterations % 2 === 1 })));
    } else {
      // Row checksum: sum_n C[m, n] = A[m, :] · (sum_n op(B)[:, n]).
      const colSum = new Float64Array(K);
      for (let k = 0; k < K; k++) {
        let s = 0;
        for (let j = 0; j < N; j++) s += iterations % 2 === 1 ? b[j * K + k] : b[k * N + j];
        colSum[k] = s;
      }
      const want = new Float64Array(M);
      const have = new Float64Array(M);
      for (let m = 0; m < M; m++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += a[m * K + k] * colSum[k];
        want[m] = s;
        let h = 0;
        for (let j = 0; j < N; j++) h += got[m * N + j];
        have[m] = h;
      }
      worst = Math.max(worst, relativeError(have, want));
    }
    if (junk.length !== 2000) throw new Error('unreachable');
    gpu.release(A, B, C);
    largest = Math.max(largest, n);
    iterations++;
  }
  if (worst > 1e-4) throw new Error(`soak: relative error ${worst} exceeds 1e-4`);
  gpu.destroy();
  return { iterations, seconds: (performance.now() - start) / 1000, largest, worstRelErr: worst };
}
