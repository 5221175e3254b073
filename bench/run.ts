/**
 * `npm run bench [-- --sizes 256,512,1024] [--only matmul,overhead]`: prints the adapter record, then one JSON
 * line per measurement, then a summary with the adapter's measured ceilings (bench/ceiling-measure.ts: the
 * FMA rate of register-only fma chains and the bandwidth of a vec4 copy kernel, measured in the same run)
 * and each record's fraction of its ceiling: GFLOP/s of the FMA rate, GB/s of the copy bandwidth. Runs on
 * Node (Dawn).
 *
 * End-to-end benchmarks are separate scripts, each printing one JSON object: bench/target.ts (target
 * prefill / decode, decode vs copy bandwidth), bench/train.ts (EAGLE3 training tokens/s),
 * bench/runtime.ts, bench/dataplane.ts; bench/gpu.sh runs the first two at full size.
 */
import { Gpu } from '../src/gpu/gpu.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { benchMatmul } from './kernels/matmul.ts';
import { benchOverhead } from './overhead.ts';
import { BENCH_FAMILIES } from './families.ts';
import { measureCeiling } from './ceiling-measure.ts';
import type { BenchRecord } from './record.ts';

const args = nodePlatform.args();
const opt = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const sizes = (opt('--sizes') ?? '256,512,1024').split(',').map(Number);
const only = opt('--only')?.split(',');
const wanted = (family: string) => !only || only.includes(family);

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
console.log(JSON.stringify({ adapter: ctx.record }));
const records: BenchRecord[] = [];
const emit = (rs: BenchRecord[]) => {
  for (const r of rs) {
    records.push(r);
    console.log(JSON.stringify(r));
  }
};
if (wanted('overhead')) emit(await benchOverhead(gpu));
if (wanted('matmul')) emit(await benchMatmul(gpu, sizes));
for (const [family, run] of BENCH_FAMILIES) if (wanted(family)) emit(await run(gpu));

// Measured after the kernels, so a machine that got busier during the run lowers both alike.
const ceiling = await measureCeiling(gpu);
const fractions = records.map((r) => ({
  family: r.family,
  variant: r.variant,
  shape: r.shape,
  ofFmaCeiling: r.gflops ? Number((r.gflops / ceiling.fmaGflops).toFixed(3)) : undefined,
  ofCopyCeiling: r.gbps ? Number((r.gbps / ceiling.copyGBs).toFixed(3)) : undefined,
}));
console.log(JSON.stringify({ summary: { ceiling, fractions } }));
gpu.destroy();
await nodePlatform.exit(0);
