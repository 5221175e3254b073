/**
 * A cluster trainer with nothing to generate or evaluate (a dataset with its replies,
 * `--eval-prompts 0`) holds no target model: it reads the target's embedding and the lm_head rows of
 * the draft vocabulary from the files (src/training/run/target-load.ts, src/model/target/target-tables.ts).
 * With real processes (a durable redis-server, one `speclab rollout`, one `speclab train --cluster`)
 * it trains the steps and losses of the single-process run with the same settings, exports the same
 * draft bytes, says what it loaded, plans no target weights beyond the embedding and stays within
 * its plan. Without held-out prompts the single-process run measures no acceptance and says how to.
 */
import { assert, assertEqual } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import type { FileStore } from '../../src/ports/storage.ts';

type RedisFixture = typeof import('../dataplane/redis-fixture.ts');
type CliProcesses = typeof import('./cli-process.ts');

/** Resolved relative to this file, at run time, so bundlers never follow it into node:child_process. */
function nodeOnlyImport<T>(specifier: string): Promise<T> {
  return import(/* @vite-ignore */ specifier) as Promise<T>;
}

const TARGET = 'assets/lab-target';
const SETTINGS = [
  ...['--data', 'assets/conversations/sample.jsonl', '--chat-template', 'speclab', '--max-length', '64'],
  ...['--eval-prompts', '0', '--epochs', '2', '--round-prompts', '4', '--batch-size', '2', '--lr', '1e-2'],
  ...['--checkpoint-every', '2', '--log-every', '1', '--seed', '3'],
];

async function trainLosses(files: FileStore, path: string): Promise<number[]> {
  const lines = new TextDecoder()
    .decode(await files.read(path))
    .trim()
    .split('\n');
  return lines
    .map((l) => JSON.parse(l) as { phase?: string; loss: number })
    .filter((r) => r.phase === 'train')
    .map((r) => r.loss);
}

/** The `GPU memory: peak … of … planned (N%)` percentage a run printed. */
function peakOfPlan(output: string): number {
  const m = /GPU memory: peak .* planned \((\d+)%\)/.exec(output);
  assert(m !== null, `the run prints its GPU peak against its plan:\n${output.slice(-2000)}`);
  return Number(m[1]);
}

export default defineSuite('cli/cluster-tables', (t) => {
  t.test(
    'a cluster trainer on a dataset with --eval-prompts 0 loads only the target tables and trains the single-process run',
    async (ctx) => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
      const { startCli } = await nodeOnlyImport<CliProcesses>('./cli-process.ts');
      const tmp = tempStore(ctx.platform, 'cluster-tables');
      const root = tmp.files.root;
      const server = await startRedisServer({ durable: true });
      const started: { kill(): void }[] = [];
      try {
        const single = await startCli(['train', ...SETTINGS, '--out', `${root}/single`]).exited;
        assertEqual(single.code, 0, `single-process train exit code\n${single.output.slice(-3000)}`);
        assert(/phase eval-before: no held-out prompts \(--eval-prompts 0\)/.test(single.output), single.output.slice(-3000));
        assert(
          /acceptance length: not measured \(--eval-prompts 0\); .*speclab eval --target /.test(single.output),
          single.output.slice(-3000),
        );
        const summary = JSON.parse(new TextDecoder().decode(await tmp.files.read('single/summary.json'))) as Record<string, unknown>;
        assert(!('before' in summary) && !('after' in summary), 'summary.json holds no acceptance');

        const cluster = ['--cluster', server.url, '--run', 'tables-run'];
        const worker = startCli(['rollout', ...cluster, '--target', TARGET, '--batch', '2', '--poll-ms', '10', '--wait-ms', '90000']);
        started.push(worker);
        const trainer = startCli(['train', ...SETTINGS, '--out', `${root}/cluster`, ...cluster]);
        started.push(trainer);
        const [trained, rolled] = [await trainer.exited, await worker.exited];
        assertEqual(trained.code, 0, `train --cluster exit code\n${trained.output.slice(-3000)}`);
        assertEqual(rolled.code, 0, `rollout exit code\n${rolled.output.slice(-3000)}`);
        assert(
          /target tables only \(nothing to generate or evaluate\)/.test(trained.output),
          `says what it loaded:\n${trained.output.slice(0, 3000)}`,
        );
        assert(!/loading target weights|target weights: /.test(trained.output), 'no target model loaded');
        assert(/ {2}target embedding +\S+ \S+ +\S+% +the target's embedding/.test(trained.output), 'the plan holds the embedding only');

        const [reference, losses] = [
          await trainLosses(tmp.files, 'single/metrics.jsonl'),
          await trainLosses(tmp.files, 'cluster/metrics.jsonl'),
        ];
        assert(reference.length > 0, 'the single-process run trains');
        assertEqual(losses.join(), reference.join(), "the cluster trainer's losses, step by step");
        for (const file of ['model.safetensors', 'config.json']) {
          const [a, b] = [await tmp.files.read(`single/draft/${file}`), await tmp.files.read(`cluster/draft/${file}`)];
          assert(a.byteLength === b.byteLength && a.every((x, i) => x === b[i]), `draft/${file}: the same bytes`);
        }
        const [singlePeak, clusterPeak] = [peakOfPlan(single.output), peakOfPlan(trained.output)];
        assert(clusterPeak <= 100 && singlePeak <= 100, `within the plans: single ${singlePeak}%, cluster trainer ${clusterPeak}%`);
        ctx.note('peakOfPlan', `single ${singlePeak}%, cluster trainer ${clusterPeak}%`);
      } finally {
        for (const p of started) p.kill();
        await server.stop();
        await tmp.cleanup();
      }
    },
    { only: ['node'], timeoutMs: 240_000 },
  );
});
