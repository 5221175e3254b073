/**
 * The adapter's ceilings (measureCeiling, used by bench/ceiling.ts and bench/run.ts), which
 * bench/RESULTS.md gives every matmul, GEMV and step figure as a fraction of:
 *
 *   npx tsx scripts/embed-shaders.ts
 *   npx tsx bench/ceiling.ts [--reps 7] [--seconds 0.3]
 *
 * fmaGflops  the FMA rate: register-only vec4 fma chains (src/kernels/ceiling.ts, shaders/ceiling/fma.wgsl),
 *            2 FLOPs per lane per fma, enough invocations to fill every core or SM and enough steps
 *            that one dispatch lasts about --seconds; the median of --reps timed dispatches.
 * copyGBs    the bandwidth a kernel sees: a 256 MiB (or the binding limit's) vec4 copy (shaders/ceiling/copy.wgsl),
 *            bytes read plus written; the median of --reps.
 * copyBufferGBs  the driver's copyBufferToBuffer of the same size, for comparison (bench/copy.ts).
 * Prints one JSON object; the adapter is named in it. Times come from timestamp queries where the
 * adapter has them, else from the wall clock around a wait (GpuTimer).
 */
import type { Gpu } from '../src/gpu/gpu.ts';
import { CEILING_GEOMETRY, copyVec4, fmaPeak, fmaPeakFlops } from '../src/kernels/ceiling.ts';
import { medianSeconds } from './record.ts';

/** The adapter's FMA rate and kernel-visible bandwidth (see the header); `adapter` names it. */
export interface Ceiling {
  adapter: string;
  fmaGflops: number;
  copyGBs: number;
  copyBufferGBs: number;
  fma: { invocations: number; iters: number; chains: number; ms: number };
  copy: { bytes: number; ms: number };
  timer: string;
}

export async function measureCeiling(gpu: Gpu, reps = 7, targetSeconds = 0.3): Promise<Ceiling> {
  // The FMA rate: 64 Ki invocations (1,024 workgroups) keep any CPU's or GPU's lanes busy; the step
  // count is scaled from a short probe so one dispatch lasts about targetSeconds.
  const invocations = 1024 * CEILING_GEOMETRY.WG;
  const out = gpu.tensor([invocations], 'f32', 'ceiling.fma');
  let iters = 64;
  const probe = await medianSeconds(gpu, () => fmaPeak(gpu, out, iters), 3);
  iters = Math.max(64, Math.round((iters * targetSeconds) / Math.max(probe, 1e-6)));
  const fmaSeconds = await medianSeconds(gpu, () => fmaPeak(gpu, out, iters), reps);
  gpu.release(out);

  // The bandwidth: the largest copy of up to 256 MiB one binding holds.
  const limits = gpu.ctx.limits;
  const bytes = Math.min(256 * 2 ** 20, limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const elements = Math.floor(bytes / 16) * 4;
  const src = gpu.zeros([elements], 'f32', 'ceiling.src');
  const dst = gpu.tensor([elements], 'f32', 'ceiling.dst');
  const copySeconds = await medianSeconds(gpu, () => copyVec4(gpu, src, dst), reps);
  const bufferSeconds = await medianSeconds(gpu, () => gpu.batcher.copyBuffer(src.part.buffer, 0, dst.part.buffer, 0, elements * 4), reps);
  gpu.release(src, dst);

  const r = gpu.ctx.record;
  const round = (x: number) => Number(x.toFixed(2));
  return {
    adapter: `${r.description || r.device || r.vendor} (${r.architecture || 'unknown'}${r.isFallbackAdapter ? ', fallback' : ''})`,
    fmaGflops: round(fmaPeakFlops(invocations, iters) / fmaSeconds / 1e9),
    copyGBs: round((2 * elements * 4) / copySeconds / 1e9),
    copyBufferGBs: round((2 * elements * 4) / bufferSeconds / 1e9),
    fma: { invocations, iters, chains: CEILING_GEOMETRY.CHAINS, ms: Number((fmaSeconds * 1e3).toFixed(3)) },
    copy: { bytes: elements * 4, ms: Number((copySeconds * 1e3).toFixed(3)) },
    timer: gpu.ctx.hasFeature('timestamp-query') ? 'timestamp queries' : 'wall clock',
  };
}
