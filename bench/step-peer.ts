/**
 * The EAGLE3 training step against single-thread PyTorch, alternated in one run:
 *
 *   bash bench/peers/setup.sh            # once: Debian's PyTorch (OpenBLAS) and PyTorch's CPU wheel (MKL)
 *   npx tsx bench/step-peer.ts [--configs fixture,lab,mid] [--rounds 3] [--steps N] [--warmup N] [--python /usr/bin/python3,.speclab/peers-venv/bin/python]
 *
 * Each round times, for each config in turn, SpecLab's step (bench/train-rig.ts, as
 * bench/step-threads.ts times it: forward + backward through the TTT unroll + AdamW, waited for) and
 * then the same step in PyTorch (bench/peers/eagle3_step_torch.py, a child process with one thread) under
 * each Python of `--python` in turn, so all meet the machine in the same state; the rounds alternate them
 * again. The two PyTorch builds differ by their BLAS (OpenBLAS, MKL), which decides most of their time. The fixture's peer runs on
 * the SpecForge fixture's own weights and batch and refuses to time unless its loss and gradient norm
 * match SpecForge's. SpecLab's rig draws random weights at the same shapes: the step's work does not
 * depend on the values. Prints a JSON line per config, round and peer (the two medians and their ratio),
 * then one per config and peer with the ranges over the rounds. Steps per timing: fixture 60, lab 20, mid 3
 * (`--steps N` sets all), after 400, 3 and 1 warm-up steps (`--warmup N` sets all), on both sides.
 *
 * Why 400 at the fixture: its step is a few milliseconds of JavaScript encoding 85 small dispatches, and
 * each function of that path runs a few times per step, so V8's optimizing compiler is still compiling
 * them, on a helper thread, for hundreds of steps. On a 2-core machine that CPU comes out of the device's
 * workers: the helper thread took 4.3 ms of CPU per step after 10 warm-up steps, 1.1 after 400 and 0.8
 * after 600 (`node --v8-pool-size=1 --import tsx bench/step-threads.ts --configs fixture --warmup N`).
 * A training run spends nearly all its steps past that point; PyTorch's step (C++) has no such phase.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Gpu } from '../src/gpu/gpu.ts';
import { eagle3SglangConfig } from '../src/model/eagle3/export.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { median } from './record.ts';
import { STEP_CONFIGS, wantedStepConfigs, type StepBenchConfig } from './step-configs.ts';
import { buildTrainRig } from './train-rig.ts';

const SCRIPT = 'bench/step-peer.ts';
const args = nodePlatform.args();
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const wanted = wantedStepConfigs(SCRIPT, opt('--configs', 'fixture,lab'));
const rounds = Number(opt('--rounds', '3'));
const stepsFlag = opt('--steps', '');
const warmupFlag = opt('--warmup', '');
const pythons = opt('--python', '/usr/bin/python3,.speclab/peers-venv/bin/python').split(',');
const fixtures = nodePlatform.env('SPECLAB_FIXTURES') ?? '../shared/fixtures';
for (const [flag, n] of [
  ['--rounds', rounds],
  ['--steps', stepsFlag === '' ? 1 : Number(stepsFlag)],
  ['--warmup', warmupFlag === '' ? 1 : Number(warmupFlag)],
] as const)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${SCRIPT}: ${flag} must be a positive integer, got ${n}`);

/** Timed steps and warm-up steps per config: about two seconds of SpecLab steps each, mid excepted. */
const PLAN: Readonly<Record<string, { steps: number; warmup: number }>> = {
  fixture: { steps: 60, warmup: 400 },
  lab: { steps: 20, warmup: 3 },
  mid: { steps: 3, warmup: 1 },
};
const plan = (name: string) => ({
  ...PLAN[name],
  ...(stepsFlag === '' ? {} : { steps: Number(stepsFlag) }),
  ...(warmupFlag === '' ? {} : { warmup: Number(warmupFlag) }),
});

for (const python of pythons) {
  const probe = spawnSync(python, ['-c', 'import torch'], { encoding: 'utf8' });
  if (probe.status !== 0)
    throw new Error(
      `${SCRIPT}: --python ${python} cannot import torch (${(probe.stderr || String(probe.error)).trim().split('\n').pop()}); run bash bench/peers/setup.sh`,
    );
}

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
console.log(JSON.stringify({ adapter: ctx.record.description || ctx.record.vendor }));
const configs = new Map<string, StepBenchConfig>();
for (const name of wanted) configs.set(name, await STEP_CONFIGS[name](false));
const work = mkdtempSync(join(tmpdir(), 'speclab-step-peer-'));

async function speclabMs(name: string): Promise<number> {
  const { config, shape } = configs.get(name)!;
  const { steps, warmup } = plan(name);
  const rig = await buildTrainRig(gpu, config, shape);
  try {
    for (let i = 0; i < warmup; i++) await rig.step();
    const times: number[] = [];
    for (let i = 0; i < steps; i++) times.push((await rig.step()).seconds * 1e3);
    return median(times);
  } finally {
    rig.destroy();
  }
}

interface PeerResult {
  stepMsMedian: number;
  torch: string;
  blas: string;
}

function peer(python: string, name: string): PeerResult {
  const { config, shape } = configs.get(name)!;
  const { steps, warmup } = plan(name);
  const common = ['--steps', String(steps), '--warmup', String(warmup), '--threads', '1'];
  let peerArgs: string[];
  if (name === 'fixture') peerArgs = ['--fixture', fixtures, '--ttt', String(shape.ttt)];
  else {
    const file = join(work, `${name}.json`);
    writeFileSync(file, JSON.stringify(eagle3SglangConfig(config)));
    peerArgs = ['--config-json', file, '--batch', String(shape.batch), '--seq', String(shape.seq), '--ttt', String(shape.ttt)];
  }
  const run = spawnSync(python, ['bench/peers/eagle3_step_torch.py', ...peerArgs, ...common], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`${SCRIPT}: the PyTorch peer under ${python} failed on ${name}: ${run.stderr.trim()}`);
  return JSON.parse(run.stdout.trim().split('\n').pop()!) as PeerResult;
}

/** By config, then by peer label (PyTorch version and BLAS): each round's two medians. */
const results = new Map<string, Map<string, { speclab: number; peer: number }[]>>(wanted.map((n) => [n, new Map()]));
try {
  for (let round = 0; round < rounds; round++)
    for (const name of wanted) {
      const speclab = await speclabMs(name);
      for (const python of pythons) {
        const p = peer(python, name);
        const label = `PyTorch ${p.torch} (${p.blas})`;
        const byPeer = results.get(name)!;
        if (!byPeer.has(label)) byPeer.set(label, []);
        byPeer.get(label)!.push({ speclab, peer: p.stepMsMedian });
        const { shape } = configs.get(name)!;
        console.log(
          JSON.stringify({
            config: name,
            round,
            tokens: `${shape.batch} x ${shape.seq}, TTT ${shape.ttt}`,
            peer: label,
            speclabMsMedian: +speclab.toFixed(2),
            pytorchMsMedian: p.stepMsMedian,
            ratio: +(speclab / p.stepMsMedian).toFixed(2),
          }),
        );
      }
    }
} finally {
  rmSync(work, { recursive: true, force: true });
}
const range = (xs: number[], digits: number) => `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;
for (const [name, byPeer] of results)
  for (const [label, rs] of byPeer)
    console.log(
      JSON.stringify({
        config: name,
        peer: label,
        rounds: rs.length,
        speclabMs: range(
          rs.map((r) => r.speclab),
          1,
        ),
        pytorchMs: range(
          rs.map((r) => r.peer),
          1,
        ),
        ratio: range(
          rs.map((r) => r.speclab / r.peer),
          2,
        ),
      }),
    );
gpu.destroy();
await nodePlatform.exit(0);
