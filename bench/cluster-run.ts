/**
 * Samples per second of a whole training run, single-process against a cluster run with 1 and 2
 * rollout processes, in one run, alternated:
 *
 *   npx tsx bench/cluster-run.ts [--target DIR] [--rollouts 1,2] [--reps 2] [--train-prompts 24]
 *
 * Every variant is real processes (`node bin/speclab.mjs train …`, `… rollout …`) on one durable
 * redis-server (appendfsync always), with the same settings and seed, so they train the same stream.
 * From each trainer's metrics.jsonl:
 *   samplesPerSecond  samples of steps 2..N over the time between step 1 and step N (rollout of the
 *                     later rounds and training both inside; target loading and the data phase not)
 *   waitSeconds       cluster runs: time the trainer waited for rollout after step 1 (its `rollout`
 *                     events; the workers capture round r + 1 while round r trains, so only what
 *                     capture takes beyond training shows here)
 *   trainSeconds      the rest of that span: the trainer's own work
 *   firstRound        cluster runs: samples and seconds of round 0, the one round nothing overlaps
 *                     (its seconds include the workers' own start, so the worker rate is a floor)
 * and, from them, the per-worker capture rate (1 rollout process: round-0 samples / round-0 wait)
 * and the trainer's rate (samples / train), which `N machines` in the summary combines as
 * min(N × worker, trainer): with rounds overlapped, the slower of capture and training sets the pace.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { startCli } from '../test/cli/cli-process.ts';
import { startRedisServer } from '../test/dataplane/redis-fixture.ts';
import { median } from './record.ts';

const args = process.argv.slice(2);
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const target = opt('--target', 'assets/lab-target');
const rollouts = opt('--rollouts', '1,2').split(',').map(Number);
const reps = Number(opt('--reps', '2'));
const trainPrompts = Number(opt('--train-prompts', '24'));

interface StepRecord {
  phase?: string;
  event?: string;
  step?: number;
  samples?: number;
  elapsedSeconds?: number;
  seconds?: number;
  loss?: number;
}

interface Measured {
  variant: string;
  samples: number;
  spanSeconds: number;
  samplesPerSecond: number;
  waitSeconds?: number;
  trainSeconds?: number;
  firstRound?: { samples: number; seconds: number };
  lastLoss: number;
}

function measure(variant: string, metricsPath: string, cluster: boolean): Measured {
  const records = readFileSync(metricsPath, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as StepRecord);
  const steps = records.filter((r) => r.phase === 'train');
  if (steps.length < 2) throw new Error(`bench/cluster-run.ts: ${variant} logged ${steps.length} steps; raise --train-prompts`);
  const span = steps.at(-1)!.elapsedSeconds! - steps[0].elapsedSeconds!;
  const samples = steps.slice(1).reduce((a, s) => a + (s.samples ?? 0), 0);
  const result: Measured = {
    variant,
    samples,
    spanSeconds: +span.toFixed(2),
    samplesPerSecond: +(samples / span).toFixed(3),
    lastLoss: steps.at(-1)!.loss!,
  };
  if (cluster) {
    // Waits for rounds after the first step (the first round's wait precedes step 1).
    const rounds = records.filter((r) => r.event === 'rollout');
    const waits = rounds.slice(1).reduce((a, r) => a + (r.seconds ?? 0), 0);
    result.firstRound = { samples: rounds[0].samples ?? 0, seconds: +(rounds[0].seconds ?? 0).toFixed(2) };
    result.waitSeconds = +waits.toFixed(2);
    result.trainSeconds = +(span - waits).toFixed(2);
  }
  return result;
}

const root = mkdtempSync(join(tmpdir(), 'speclab-cluster-bench-'));
const server = await startRedisServer({ durable: true });
const settings = {
  target,
  trainPrompts,
  evalPrompts: 1,
  promptLength: 16,
  responseLength: 24,
  epochs: 1,
  roundPrompts: 8,
  batchSize: 4,
  maxNewTokens: 2,
  evalTrainPrompts: 0,
  evalEvery: 0,
  checkpointEvery: 4,
  seed: 1,
};
writeFileSync(join(root, 'train.json'), JSON.stringify(settings));
console.log(JSON.stringify({ bench: 'cluster-run', target, settings, redis: 'appendfsync always' }));
const results: Measured[] = [];
try {
  for (let rep = 0; rep < reps; rep++) {
    const single = startCli(['train', '--config', join(root, 'train.json'), '--out', join(root, `single-${rep}`)], 1_800_000);
    const s = await single.exited;
    if (s.code !== 0) throw new Error(`single-process train exited ${s.code}:\n${s.output.slice(-2000)}`);
    results.push(measure('single-process', join(root, `single-${rep}`, 'metrics.jsonl'), false));
    console.log(JSON.stringify({ rep, ...results.at(-1) }));
    for (const n of rollouts) {
      const run = `bench-${rep}-${n}`;
      const cluster = ['--cluster', server.url, '--run', run];
      const workers = Array.from({ length: n }, (_, i) =>
        startCli(
          ['rollout', ...cluster, '--target', target, '--batch', '4', '--poll-ms', '10', '--worker-id', `w${i}`, '--wait-ms', '600000'],
          1_800_000,
        ),
      );
      const trainer = startCli(['train', '--config', join(root, 'train.json'), '--out', join(root, run), ...cluster], 1_800_000);
      const t = await trainer.exited;
      const ended = await Promise.all(workers.map((w) => w.exited));
      if (t.code !== 0 || ended.some((e) => e.code !== 0))
        throw new Error(
          `cluster run with ${n} rollouts failed (trainer ${t.code}, rollouts ${ended.map((e) => e.code).join(',')}):\n${t.output.slice(-2000)}`,
        );
      results.push(measure(`cluster, ${n} rollout`, join(root, run, 'metrics.jsonl'), true));
      console.log(JSON.stringify({ rep, ...results.at(-1) }));
    }
  }
  const of = (variant: string) => results.filter((r) => r.variant === variant);
  const one = of('cluster, 1 rollout');
  const summary: Record<string, unknown> = {
    samplesPerSecond: Object.fromEntries([...new Set(results.map((r) => r.variant))].map((v) => [v, of(v).map((r) => r.samplesPerSecond)])),
  };
  if (one.length > 0) {
    const workerRate = median(one.map((r) => r.firstRound!.samples / r.firstRound!.seconds));
    const trainerRate = median(one.map((r) => r.samples / r.trainSeconds!));
    const onPaper = (n: number) => +Math.min(n * workerRate, trainerRate).toFixed(3);
    summary.perWorkerSamplesPerSecond = +workerRate.toFixed(3);
    summary.trainerSamplesPerSecond = +trainerRate.toFixed(3);
    summary.onPaper = Object.fromEntries([1, 2, 4, 8, 16].map((n) => [`${n} machines`, onPaper(n)]));
  }
  console.log(JSON.stringify({ summary }));
} finally {
  await server.stop();
  rmSync(root, { recursive: true, force: true });
}
