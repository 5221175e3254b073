/**
 * Where a training step's CPU time goes on a CPU adapter, thread by thread (Linux):
 *
 *   npx tsx bench/step-threads.ts [--configs fixture,lab] [--warmup N] [--steps N] [--trim-pool]
 *
 * Builds the rig of bench/step-roofline.ts (bench/train-rig.ts: forward + backward through the TTT
 * unroll + AdamW) for each config, runs --warmup steps, then --steps more, and prints per config the
 * steps' wall time (median, min, and the mean over the whole run), the median wall time the host took
 * to encode a step (`encodeMsMedian`: until the trainer returned; the batches submitted on the way
 * run meanwhile), and the CPU time per step of each
 * thread of this process that used more than 0.1 ms of it, read from /proc/self/task/<tid>/stat
 * before and after (utime + stime, in clock ticks of 10 ms: read them over many steps). On llvmpipe
 * the rows are the main thread (tid = pid: JavaScript, encoding, waits), the device's queue thread
 * and its worker threads (the shaders); `cpuMsPerStep` is their sum. A step's wall time is above
 * cpuMsPerStep / cores when the threads wait on each other: every dispatch hands work from the queue
 * thread to the workers and back. Step-to-step spread on a shared machine is large: compare trees
 * alternately, several runs each, and read medians. `--trim-pool` empties the buffer pool before every
 * timed step (Gpu.trimPool, as `speclab train` does when a batch's shapes change), so each step creates
 * its buffers and bind groups anew: run with and without it, alternated, to see what keeping them saves.
 */
import { readdirSync, readFileSync } from 'node:fs';
import process from 'node:process';
import { Gpu } from '../src/gpu/gpu.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { STEP_CONFIGS, wantedStepConfigs } from './step-configs.ts';
import { median } from './record.ts';
import { buildTrainRig } from './train-rig.ts';

const args = nodePlatform.args();
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const wanted = wantedStepConfigs('bench/step-threads.ts', opt('--configs', 'fixture,lab'));
const warmup = Number(opt('--warmup', '8'));
const steps = Number(opt('--steps', '80'));
const trimPool = args.includes('--trim-pool');
for (const [flag, n] of [
  ['--warmup', warmup],
  ['--steps', steps],
] as const)
  if (!Number.isInteger(n) || n < 1) throw new Error(`bench/step-threads.ts: ${flag} must be a positive integer, got ${n}`);

const TICK_MS = 10;

/** CPU milliseconds used so far by each thread of this process, by tid. */
function threadCpuMs(): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended between the listing and the read
    }
    // Fields after the command name (which may hold spaces, so split after its closing parenthesis):
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after it.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.set(Number(tid), (Number(fields[11]) + Number(fields[12])) * TICK_MS);
  }
  return out;
}

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
console.log(JSON.stringify({ adapter: ctx.record.description || ctx.record.vendor }));
for (const name of wanted) {
  const { config, shape } = await STEP_CONFIGS[name](false);
  const rig = await buildTrainRig(gpu, config, shape);
  for (let i = 0; i < warmup; i++) await rig.step();
  const before = threadCpuMs();
  const start = performance.now();
  const times: number[] = [];
  const encodeTimes: number[] = [];
  let dispatches = 0;
  for (let i = 0; i < steps; i++) {
    if (trimPool) gpu.trimPool();
    const r = await rig.step();
    times.push(r.seconds * 1e3);
    encodeTimes.push(r.encodeSeconds * 1e3);
    dispatches = r.dispatches;
  }
  const wallMs = performance.now() - start;
  const after = threadCpuMs();
  rig.destroy();
  const threads = [...after]
    .map(([tid, ms]) => ({ tid, main: tid === process.pid, ms: (ms - (before.get(tid) ?? 0)) / steps }))
    .filter((t) => t.ms > 0.1)
    .sort((a, b) => b.ms - a.ms);
  console.log(
    JSON.stringify({
      config: name,
      tokens: `${shape.batch} x ${shape.seq}, TTT ${shape.ttt}`,
      trimPool,
      dispatches,
      stepMsMedian: +median(times).toFixed(2),
      stepMsMin: +Math.min(...times).toFixed(2),
      stepMsMean: +(wallMs / steps).toFixed(2),
      encodeMsMedian: +median(encodeTimes).toFixed(2),
      cpuMsPerStep: +threads.reduce((a, t) => a + t.ms, 0).toFixed(2),
      threads: threads.map((t) => ({ tid: t.tid, main: t.main, cpuMsPerStep: +t.ms.toFixed(2) })),
    }),
  );
}
gpu.destroy();
await nodePlatform.exit(0);
