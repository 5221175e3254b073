/**
 * The two roles of a cluster run as commands: `speclab train --cluster URL --run NAME` (the
 * trainer) and `speclab rollout --cluster URL --run NAME --target DIR` (its rollout workers).
 * First their flags: the usage errors, one line each naming the flag. Then the parity
 * acceptance with real processes: a durable redis-server, two `speclab rollout` processes and one
 * `speclab train --cluster` process on the llama-tiny fixture; the trainer exits 0, both rollouts
 * exit 0 once the run is finished, and the run logs the same steps with the same losses as the same
 * settings trained by the single-process `speclab train`, and exports the same draft bytes. Node-only for the processes (redis-server,
 * child processes); Node-only modules load at run time.
 */
import { loadTrainConfig, parseTrainFlags, trainCommand } from '../../src/cli/train.ts';
import { ROLLOUT_DEF, rolloutArgs } from '../../src/cli/cluster-options.ts';
import { parseCommand } from '../../src/cli/options.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../model/synthetic-checkpoint.ts';
import type { FileStore } from '../../src/ports/storage.ts';

type RedisFixture = typeof import('../dataplane/redis-fixture.ts');
type CliProcesses = typeof import('./cli-process.ts');

/** Resolved relative to this file, at run time, so bundlers never follow it into node:child_process. */
function nodeOnlyImport<T>(specifier: string): Promise<T> {
  return import(/* @vite-ignore */ specifier) as Promise<T>;
}

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const rollout = (...argv: string[]) => rolloutArgs(parseCommand(ROLLOUT_DEF, argv));
const URL_ = 'redis://127.0.0.1:6399/0';

interface StepRecord {
  phase?: string;
  step: number;
  loss: number;
}

async function trainSteps(files: FileStore, path: string): Promise<StepRecord[]> {
  const lines = new TextDecoder()
    .decode(await files.read(path))
    .trim()
    .split('\n');
  return lines.map((l) => JSON.parse(l) as StepRecord).filter((r) => r.phase === 'train');
}

export default defineSuite('cli/cluster-roles', (t) => {
  t.test(
    'flags: --cluster and --run both or neither, a redis:// URL, no --rollout-workers with --cluster; rollout needs --target',
    async (ctx) => {
      const flags = parseTrainFlags(['--cluster', URL_, '--run', 'r1', '--epochs', '2']);
      assertDeepEqual([flags.values.cluster, flags.values.run], [URL_, 'r1'], 'train --cluster/--run parsed');
      assertThrows(() => parseTrainFlags(['--cluster', URL_]), /^--cluster: needs --run NAME/, '--cluster without --run');
      assertThrows(() => parseTrainFlags(['--run', 'r1']), /^--run: needs --cluster/, '--run without --cluster');
      assertThrows(
        () => parseTrainFlags(['--cluster', 'http://h:1/0', '--run', 'r1']),
        /^--cluster: "http:\/\/h:1\/0" is not a redis:\/\/ URL$/,
        'bad URL scheme',
      );
      assertThrows(() => parseTrainFlags(['--cluster', 'nonsense', '--run', 'r1']), /^--cluster: "nonsense" is not a URL/, 'not a URL');
      assertThrows(
        () => parseTrainFlags(['--cluster', URL_, '--run', 'a{b']),
        /--run must not contain braces/,
        'run id that cannot be a hash tag',
      );
      assertThrows(
        () => parseTrainFlags(['--cluster', URL_, '--run', 'r1', '--rollout-workers', '2']),
        /^--rollout-workers: has no meaning with --cluster/,
        '--rollout-workers with --cluster',
      );
      assertThrows(
        () => parseTrainFlags(['--cluster', URL_, '--run', 'r1', '--offline', 'x']),
        /^--offline: .*cannot be a --cluster run/,
        '--offline with --cluster',
      );
      const tmp = tempStore(ctx.platform, 'cluster-flags');
      try {
        // The same rules for a config file's keys.
        await tmp.files.writeAtomic('c.json', encode({ cluster: URL_, run: 'r1', rolloutWorkers: 2 }));
        let message = '';
        await loadTrainConfig(ctx.platform, ['--config', `${tmp.files.root}/c.json`]).catch((e: Error) => (message = e.message));
        assert(/^--rollout-workers: has no meaning with --cluster/.test(message), `config file: ${message}`);
        await tmp.files.writeAtomic('d.json', encode({ run: 'r1' }));
        message = '';
        await loadTrainConfig(ctx.platform, ['--config', `${tmp.files.root}/d.json`]).catch((e: Error) => (message = e.message));
        assert(/^--run: needs --cluster/.test(message), `config file: ${message}`);
      } finally {
        await tmp.cleanup();
      }

      assertDeepEqual(
        rollout('--cluster', URL_, '--run', 'r1', '--target', 't'),
        { cluster: URL_, run: 'r1', target: 't', targetPrecision: 'f32', batch: 4, pollMs: 50, workerId: undefined, waitMs: 60_000 },
        'rollout defaults',
      );
      assertThrows(() => rollout('--cluster', URL_, '--run', 'r1'), /^--target is required$/, 'rollout without --target');
      assertThrows(() => rollout('--run', 'r1', '--target', 't'), /^--cluster is required$/, 'rollout without --cluster');
      assertThrows(
        () => rollout('--cluster', 'http://h', '--run', 'r1', '--target', 't'),
        /^--cluster: "http:\/\/h" is not a redis:\/\/ URL$/,
        'rollout bad URL',
      );
      assertThrows(() => rollout('--cluster', URL_, '--run', 'r1', '--target', 't', '--batch', '0'), /^--batch: /, 'batch 0');
      assertThrows(
        () => rollout('--cluster', URL_, '--run', 'r1', '--target', 't', '--target-precision', 'bf16'),
        /^--target-precision: must be f32 or f16/,
        'target precision',
      );
      assertThrows(
        () => rollout('--cluster', URL_, '--run', 'r1', '--target', 't', '--worker-id', 'a b'),
        /^--worker-id: /,
        'worker id with a blank',
      );
    },
    { only: ['node', 'deno'] },
  );

  t.test(
    'real processes: two speclab rollout and one speclab train --cluster train the steps and losses of the single-process speclab train',
    async (ctx) => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
      const { startCli } = await nodeOnlyImport<CliProcesses>('./cli-process.ts');
      const tmp = tempStore(ctx.platform, 'cluster-roles');
      const root = tmp.files.root;
      const server = await startRedisServer({ durable: true });
      const started: { kill(): void }[] = [];
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        // Two epochs of 6 sequences in rounds of 4, batch 2: 6 steps, three rounds the rollouts wait between.
        const settings = {
          target: `${root}/target`,
          trainPrompts: 6,
          evalPrompts: 1,
          responseLength: 12,
          epochs: 2,
          roundPrompts: 4,
          batchSize: 2,
          lr: 1e-2,
          maxNewTokens: 8,
          evalTrainPrompts: 0,
          evalEvery: 0,
          checkpointEvery: 2,
          logEvery: 1,
          seed: 3,
        };
        await tmp.files.writeAtomic('train.json', encode(settings));
        const single: string[] = [];
        const singleCode = await trainCommand(
          ctx.platform,
          ['--config', `${root}/train.json`, '--out', `${root}/single`],
          (l) => single.push(l),
          ctx.gpu,
        );
        assertEqual(singleCode, 0, `single-process train exit code\n${single.join('\n')}`);

        const t0 = performance.now();
        const run = 'roles-run';
        const cluster = ['--cluster', server.url, '--run', run];
        // The rollouts start first: they wait for the trainer's manifest.
        const rollouts = ['a', 'b'].map((w) =>
          startCli([
            'rollout',
            ...cluster,
            '--target',
            `${root}/target`,
            '--batch',
            '2',
            '--poll-ms',
            '10',
            '--worker-id',
            `rollout-${w}`,
            '--wait-ms',
            '90000',
          ]),
        );
        started.push(...rollouts);
        const trainer = startCli(['train', '--config', `${root}/train.json`, '--out', `${root}/cluster`, ...cluster]);
        started.push(trainer);
        const trained = await trainer.exited;
        assertEqual(trained.code, 0, `train --cluster exit code\n${trained.output.slice(-3000)}`);
        assert(
          trained.output.includes(`waiting for rollout workers: node bin/speclab.mjs rollout --cluster ${server.url} --run ${run}`),
          `the trainer says what to start:\n${trained.output.slice(0, 2000)}`,
        );
        const ended = await Promise.all(rollouts.map((r) => r.exited));
        ctx.note('clusterSeconds', ((performance.now() - t0) / 1000).toFixed(1));
        let committed = 0;
        for (const [i, r] of ended.entries()) {
          assertEqual(r.code, 0, `rollout ${i} exit code once the run finished\n${r.output.slice(-3000)}`);
          const summary = /rollout rollout-[ab]: the run is finished; committed (\d+) samples/.exec(r.output);
          assert(summary !== null, `rollout ${i} prints its summary:\n${r.output.slice(-2000)}`);
          committed += Number(summary[1]);
        }
        ctx.note('committedByWorkers', ended.map((r) => /committed (\d+) samples/.exec(r.output)?.[1]).join('+'));
        assertEqual(committed, settings.trainPrompts * settings.epochs, 'every sample committed once by the two rollout processes');

        const reference = await trainSteps(tmp.files, 'single/metrics.jsonl');
        const steps = await trainSteps(tmp.files, 'cluster/metrics.jsonl');
        assertEqual(reference.length, 6, 'the single-process run trains 6 steps');
        assertEqual(steps.length, reference.length, 'the cluster run logs as many steps as the single-process run');
        for (const [i, st] of steps.entries()) {
          assertEqual(st.step, reference[i].step, `step number ${i + 1}`);
          assertEqual(st.loss, reference[i].loss, `loss of step ${i + 1} equals the single-process run's`);
        }
        assert(await tmp.files.exists('cluster/draft/model.safetensors'), 'the cluster trainer exports its draft');
        for (const file of ['model.safetensors', 'config.json']) {
          const [a, b] = [await tmp.files.read(`single/draft/${file}`), await tmp.files.read(`cluster/draft/${file}`)];
          assert(
            a.byteLength === b.byteLength && a.every((x, i) => x === b[i]),
            `draft/${file}: the cluster run exports the single-process run's bytes (${a.byteLength} and ${b.byteLength} bytes)`,
          );
        }
        assert(!(await tmp.files.exists('cluster/metadata')), 'no file ledger in --out: the ledger is in Redis');

        // Refusals, one line each (exit 1): a worker on another target precision never captures; a
        // worker finds no trainer; a fresh trainer is refused where Redis holds the run's state.
        // And `--resume` alone continues the finished cluster run from its stored settings: nothing left to train.
        // Ctrl-C of a worker still waiting for its trainer: exit 130 at once, nothing committed.
        const idle = startCli([
          'rollout',
          '--cluster',
          server.url,
          '--run',
          'idle-run',
          '--target',
          `${root}/target`,
          '--wait-ms',
          '60000',
        ]);
        started.push(idle);
        const interrupted = idle
          .waitFor(/waiting up to 60000 ms for the trainer of run idle-run/)
          .then(() => (idle.signal('SIGINT'), idle.exited));
        const [resumed, other, nobody, again, stopped] = await Promise.all([
          startCli(['train', '--out', `${root}/cluster`, '--resume']).exited,
          startCli(['rollout', ...cluster, '--target', `${root}/target`, '--target-precision', 'f16', '--wait-ms', '0']).exited,
          startCli(['rollout', '--cluster', server.url, '--run', 'no-such-run', '--target', `${root}/target`, '--wait-ms', '0']).exited,
          startCli(['train', '--config', `${root}/train.json`, '--out', `${root}/again`, ...cluster]).exited,
          interrupted,
        ]);
        assertEqual(stopped.code, 130, `an interrupted waiting rollout exits 130\n${stopped.output}`);
        assert(
          /stopped by an interrupt before the trainer of run idle-run published it; committed nothing/.test(stopped.output),
          stopped.output,
        );
        assertEqual(other.code, 1, `a rollout on another target precision is refused\n${other.output}`);
        assert(
          /^speclab rollout: --run roles-run: this worker's target differs from the run manifest's \(target\.precision: "f32" → "f16"; .*refusing to capture$/m.test(
            other.output,
          ),
          other.output,
        );
        assertEqual(nobody.code, 1, `a rollout without a trainer gives up\n${nobody.output}`);
        assert(
          /^speclab rollout: --run no-such-run: no trainer published this run on .* within 0 ms \(--wait-ms\)/m.test(nobody.output),
          nobody.output,
        );
        assertEqual(again.code, 1, `a fresh trainer of a run Redis holds is refused\n${again.output}`);
        assert(
          /^speclab train: --run roles-run: .* already holds state of this run \(12 committed samples, durable step 6\); continue it with --resume/m.test(
            again.output,
          ),
          again.output,
        );
        assert(!(await tmp.files.exists('again/checkpoints')), 'the refused start left no run behind');
        assertEqual(resumed.code, 0, `--resume of the finished cluster run\n${resumed.output.slice(-3000)}`);
        assert(
          resumed.output.includes('rollout by the speclab rollout processes of run roles-run'),
          `the resume is a cluster run again:\n${resumed.output.slice(-3000)}`,
        );
        assertEqual((await trainSteps(tmp.files, 'cluster/metrics.jsonl')).length, 6, 'the resume trains no step again');
        ctx.note(
          'trainerOutput',
          trained.output
            .split('\n')
            .filter((l) => /cluster:|phase train:/.test(l))
            .join(' | '),
        );
        ctx.note(
          'rolloutOutput',
          ended[0].output
            .split('\n')
            .filter((l) => l.startsWith('rollout '))
            .slice(0, 2)
            .join(' | '),
        );
      } finally {
        for (const p of started) p.kill();
        await server.stop();
        await tmp.cleanup();
      }
    },
    { only: ['node'], timeoutMs: 240_000 },
  );
});
