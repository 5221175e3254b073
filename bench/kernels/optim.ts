/**
 * Optimizer benchmark: GB/s of the global-norm + clip-coefficient passes (read every gradient once)
 * and of the fused AdamW step (read grad, param, m, v; write param, m, v), as the host picks it (four
 * elements per invocation for these sizes) and one element per invocation (optim/adamw dispatched
 * directly), for the ratio.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { elementGrid } from '../../src/kernels/elementwise-common.ts';
import { OPTIM_KERNELS, adamwStep, adamwUniforms, globalGradNorm, gradNormWorkspaceSize } from '../../src/kernels/optim.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/**
 * Parameter element counts: the fixture draft's one parameter slab (13 tensors at 256-byte offsets),
 * a mid draft's MLP projection (1024 x 2816) and a Llama-8B one (4096 x 14336).
 */
export const OPTIM_BENCH_SIZES: readonly number[] = [64704, 1024 * 2816, 4096 * 14336];

export async function benchOptim(gpu: Gpu, sizes: readonly number[] = OPTIM_BENCH_SIZES): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(75);
  for (const n of sizes) {
    const G = gpu.upload([n], 'f32', rng.floats(n, 1e-3), 'grad');
    const P = gpu.upload([n], 'f32', rng.floats(n), 'param');
    const M = gpu.zeros([n], 'f32', 'm');
    const V = gpu.zeros([n], 'f32', 'v');
    const partials = gpu.tensor([gradNormWorkspaceSize([G])], 'f32', 'partials');
    const result = gpu.tensor([2], 'f32', 'result');
    const shape = `${n}`;
    const norm = await medianSeconds(gpu, () => globalGradNorm(gpu, [G], partials, result, { maxNorm: 0.5 }));
    out.push({ family: 'optim', variant: 'grad norm', shape, ms: norm * 1e3, gbps: (n * 4) / norm / 1e9 });
    const opts = { lr: 1e-4, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, step: 1, clip: result };
    const step = await medianSeconds(gpu, () => adamwStep(gpu, P, G, M, V, opts));
    out.push({ family: 'optim', variant: 'adamw (clip fused)', shape, ms: step * 1e3, gbps: (7 * n * 4) / step / 1e9 });
    // A tensor past one binding is stepped part by part: the one-element kernel is timed on the first
    // part and its rate compared.
    const part = (t: typeof G) => ({ buffer: t.parts[0].buffer, offset: t.parts[0].byteOffset, size: t.parts[0].byteLength });
    const n0 = P.parts[0].rowCount * P.rowElements;
    const scalar = await gpu.pipelines.get(OPTIM_KERNELS.adamw, { USE_CLIP: true });
    const uniforms = adamwUniforms(opts, n0);
    const bindings = [part(G), result.binding(), part(P), part(M), part(V)];
    const one = await medianSeconds(gpu, () => gpu.batcher.dispatch(scalar, uniforms, bindings, elementGrid(gpu, n0)));
    out.push({ family: 'optim', variant: 'adamw (clip fused) one element', shape: `${n0}`, ms: one * 1e3, gbps: (7 * n0 * 4) / one / 1e9 });
    gpu.release(G, P, M, V, partials, result);
  }
  return out;
}
