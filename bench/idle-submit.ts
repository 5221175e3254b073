/**
 * When an idle device gets its first batch: the EAGLE3 training step under each `idleSubmitDispatches`
 * (src/gpu/command-batcher.ts), alternated round by round in one process:
 *
 *   npx tsx bench/idle-submit.ts [--values 64,16,8] [--configs fixture] [--rounds 20] [--warmup 8] [--steps 40]
 *
 * Per round and config, each value gets a fresh Gpu (same device) and rig (bench/train-rig.ts), --warmup
 * steps, then --steps timed ones (wall time until the device has finished, as bench/step-threads.ts
 * times them). 64, the batcher's maxDispatchesPerSubmit, is the batcher before the idle rule: the device
 * waits until 64 dispatches are encoded. Prints one line per round with each value's median step, then
 * per config and value its median over the rounds and, against the first value, the geometric mean of
 * the rounds' ratios and how many rounds it was faster in. A step's spread on a shared 2-core machine is
 * ±20% from run to run: read the ratios over many rounds, not one.
 */
import { Gpu } from '../src/gpu/gpu.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { median } from './record.ts';
import { STEP_CONFIGS, wantedStepConfigs } from './step-configs.ts';
import { buildTrainRig } from './train-rig.ts';

const args = nodePlatform.args();
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const values = opt('--values', '64,16,8').split(',').map(Number);
const wanted = wantedStepConfigs('bench/idle-submit.ts', opt('--configs', 'fixture'));
const rounds = Number(opt('--rounds', '20'));
const warmup = Number(opt('--warmup', '8'));
const steps = Number(opt('--steps', '40'));
for (const [flag, n] of [
  ['--rounds', rounds],
  ['--warmup', warmup],
  ['--steps', steps],
  ...values.map((v) => ['--values', v] as const),
] as const)
  if (!Number.isInteger(n) || n < 1) throw new Error(`bench/idle-submit.ts: ${flag} must hold positive integers, got ${n}`);

const ctx = await nodePlatform.acquireGpu();
console.log(JSON.stringify({ adapter: ctx.record.description || ctx.record.vendor }));
const medians = new Map<string, number[]>(); // `${config} ${value}` → the rounds' medians
for (let round = 0; round < rounds; round++) {
  for (const name of wanted) {
    const row: Record<string, number> = {};
    for (const value of values) {
      const gpu = new Gpu(ctx, { idleSubmitDispatches: value });
      const { config, shape } = await STEP_CONFIGS[name](false);
      const rig = await buildTrainRig(gpu, config, shape);
      for (let i = 0; i < warmup; i++) await rig.step();
      const times: number[] = [];
      for (let i = 0; i < steps; i++) times.push((await rig.step()).seconds * 1e3);
      rig.destroy();
      gpu.destroy();
      // Keys that are not integers keep their insertion order in JSON.
      row[`idle${value}`] = +median(times).toFixed(2);
      medians.set(`${name} ${value}`, [...(medians.get(`${name} ${value}`) ?? []), row[`idle${value}`]]);
    }
    console.log(JSON.stringify({ config: name, round, stepMsMedian: row }));
  }
}
for (const name of wanted) {
  const base = medians.get(`${name} ${values[0]}`)!;
  for (const value of values) {
    const ms = medians.get(`${name} ${value}`)!;
    const ratios = ms.map((m, r) => m / base[r]);
    console.log(
      JSON.stringify({
        config: name,
        idleSubmitDispatches: value,
        rounds,
        stepMsMedian: +median(ms).toFixed(2),
        [`ratioTo${values[0]}Geomean`]: +Math.exp(ratios.reduce((a, x) => a + Math.log(x), 0) / rounds).toFixed(3),
        roundsFaster: ratios.filter((x) => x < 1).length,
      }),
    );
  }
}
await nodePlatform.exit(0);
