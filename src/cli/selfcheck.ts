/**
 * `speclab selfcheck`: acquire the GPU, print the adapter record, and verify the GPU core end to end
 * (upload, batched dispatch, readback) with every matmul variant the device can run, in every
 * layout, against the float64 reference.
 * Exits non-zero with the failing comparison when the device computes something wrong.
 */
import { Gpu } from '../gpu/gpu.ts';
import { availableMatmulVariants, matmul, matmulDeviceFacts, matmulShapeUnfit } from '../kernels/matmul.ts';
import { matmulRef } from '../reference/matmul.ts';
import { Rng } from '../util/random.ts';
import type { Platform } from './platform.ts';

export async function selfcheck(platform: Platform, print: (line: string) => void): Promise<boolean> {
  const ctx = await platform.acquireGpu();
  print(JSON.stringify({ adapter: ctx.record }, null, 2));
  const gpu = new Gpu(ctx);
  const rng = new Rng(2024);
  let ok = true;
  // Every variant this device can run; f16-operand variants carry f16 rounding, hence their tolerance.
  for (const variant of availableMatmulVariants(ctx.features, matmulDeviceFacts(ctx))) {
    const tolerance = variant.endsWith('f16') ? 2e-3 : 1e-5;
    for (const [transA, transB] of [
      [false, false],
      [false, true],
      [true, false],
      [true, true],
    ]) {
      // Odd sizes that end in partial tiles; a variant that reads vec4s gets the nearest multiples of 4.
      const [M, N, K] = matmulShapeUnfit(variant, { M: 67, N: 45, K: 83, transA, transB }) ? [68, 44, 84] : [67, 45, 83];
      const a = rng.floats(M * K);
      const b = rng.floats(K * N);
      const A = gpu.upload([M * K], 'f32', a);
      const B = gpu.upload([K * N], 'f32', b);
      const C = gpu.tensor([M * N], 'f32');
      await matmul(gpu, A, B, C, { M, N, K }, { transA, transB, variant });
      const got = await gpu.read(C);
      const want = matmulRef(a, b, undefined, { M, N, K, transA, transB });
      let diff = 0;
      let norm = 0;
      for (let i = 0; i < want.length; i++) {
        diff += (got[i] - want[i]) ** 2;
        norm += want[i] ** 2;
      }
      const rel = Math.sqrt(diff / norm);
      const pass = rel <= tolerance;
      ok &&= pass;
      print(
        `${pass ? 'ok  ' : 'FAIL'} matmul ${variant} ${transA ? 'T' : 'N'}${transB ? 'T' : 'N'} ${M}x${N}x${K}: relative error ${rel.toExponential(2)} vs float64`,
      );
      gpu.release(A, B, C);
    }
  }
  gpu.destroy();
  ctx.destroy();
  return ok;
}
