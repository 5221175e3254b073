/**
 * `npx tsx bench/ceiling.ts [--reps 7] [--seconds 0.3]`: the adapter's FMA rate and bandwidth
 * (bench/ceiling-measure.ts says how each is measured) as one JSON object.
 */
import { Gpu } from '../src/gpu/gpu.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { measureCeiling } from './ceiling-measure.ts';

const args = nodePlatform.args();
const opt = (name: string, fallback: number): number => {
  const i = args.indexOf(name);
  const value = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got ${args[i + 1]}`);
  return value;
};

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
try {
  console.log(JSON.stringify(await measureCeiling(gpu, Math.round(opt('--reps', 7)), opt('--seconds', 0.3))));
} finally {
  gpu.destroy();
  await nodePlatform.exit(0);
}
