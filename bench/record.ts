/** One benchmark measurement, printed as a JSON line by `npm run bench`. */
import type { Gpu } from '../src/gpu/gpu.ts';

export interface BenchRecord {
  /** Kernel family, e.g. `matmul`, `rmsnorm`, `attention`. */
  family: string;
  /** Variant and direction, e.g. `tiled`, `fwd`, `bwd`. */
  variant: string;
  /** Human-readable shape, e.g. `256x256x256` or `B2 S128 H64`. */
  shape: string;
  /** Median GPU milliseconds per call. */
  ms: number;
  /** Useful floating-point work per second, in GFLOP/s (compute-bound kernels). */
  gflops?: number;
  /** Bytes moved per second, in GB/s (memory-bound kernels: count each input read and output written once). */
  gbps?: number;
}

/** The middle value of `xs` (the upper of the middle two for an even count); `xs` is left as it is. */
export function median(xs: readonly number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
}

/**
 * Median seconds of `reps` timed runs of `encode` (after one warm-up run that also compiles the
 * pipelines). `encode` must only encode work into gpu.batcher (no reads).
 */
export async function medianSeconds(gpu: Gpu, encode: () => Promise<void> | void, reps = 5): Promise<number> {
  await encode();
  await gpu.sync();
  const samples: number[] = [];
  for (let i = 0; i < reps; i++) samples.push((await gpu.timer.time(encode)).seconds);
  return median(samples);
}

/**
 * Wraps gpu.pipelines.get (an instance method, for a benchmark only) so the override constants each
 * compiled kernel was built with can be looked up by the kernel (matmul transposes live there).
 */
export function watchPipelineConstants(gpu: Gpu): WeakMap<object, Record<string, unknown>> {
  const constantsOf = new WeakMap<object, Record<string, unknown>>();
  const get = gpu.pipelines.get.bind(gpu.pipelines);
  gpu.pipelines.get = async (def, constants = {}) => {
    const kernel = await get(def, constants);
    constantsOf.set(kernel, constants);
    return kernel;
  };
  return constantsOf;
}
