/**
 * `speclab status` against a real redis-server: the counts a passive controller of its own reads
 * from a run another controller (another process, in a real cluster) is driving, the durability
 * line, and the usage errors of its flags. Node-only (it runs redis-server); Node-only modules
 * load at run time, so the browser bundle and Deno never import them.
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { DataFlowController } from '../../src/control/controller.ts';
import { openRedisControlStores } from '../../src/control/redis/redis-control-stores.ts';
import { STATUS_DEF, statusArgs } from '../../src/cli/cluster-options.ts';
import { parseCommand } from '../../src/cli/options.ts';
import { formatClusterStatus, readClusterStatus } from '../../src/cli/status.ts';
import type { Platform } from '../../src/cli/platform.ts';
import { sampleRef } from '../contracts/fixtures.ts';

type RedisFixture = typeof import('../dataplane/redis-fixture.ts');

function nodeOnlyImport<T>(specifier: string): Promise<T> {
  return import(/* @vite-ignore */ specifier) as Promise<T>;
}

const parse = (...argv: string[]) => statusArgs(parseCommand(STATUS_DEF, argv));

export default defineSuite('cli/status', (t) => {
  t.test(
    'flags: a redis:// URL and a run id usable as a hash tag, or a usage error naming the flag',
    () => {
      assertDeepEqual(
        parse('--cluster', 'redis://127.0.0.1:6399/0', '--run', 'r1'),
        { cluster: 'redis://127.0.0.1:6399/0', run: 'r1', format: 'text' },
        'defaults',
      );
      assertThrows(() => parse('--cluster', 'http://h', '--run', 'r'), /--cluster: "http:\/\/h" is not a redis:\/\/ URL/, 'scheme');
      assertThrows(() => parse('--cluster', 'nonsense', '--run', 'r'), /--cluster: "nonsense" is not a URL/, 'not a URL');
      assertThrows(() => parse('--cluster', 'redis://h/0', '--run', 'a{b'), /--run must not contain braces/, 'brace');
      assertThrows(() => parse('--cluster', 'redis://h/0', '--run', 'r', '--format', 'xml'), /--format: must be text or json/, 'format');
    },
    { only: ['node', 'deno'] },
  ); // the flag parser (commander) does not run in a tab

  t.test(
    'reads the counts of a run driven by another controller, and says whether Redis is durable',
    async ({ platform }) => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
      const server = await startRedisServer({ durable: true });
      const link = await (platform as Platform).connectRedis!(server.url);
      try {
        // The "other process": a controller over the run's shared stores.
        const driver = DataFlowController.over('run-s', await openRedisControlStores(link, 'run-s', { url: server.url }));
        const worker = await driver.registerRolloutWorker({ workerId: 'w0' });
        const trainer = await driver.registerTrainer({ trainerId: 'tr0' });
        await driver.ingestPrompts(['t0', 't1', 't2'].map((taskId) => ({ taskId, payload: { input_ids: [1, 2] } })));
        const [task] = await driver.leasePromptTasks(worker, 1);
        await driver.commitSamples(worker, [sampleRef(task.taskId, { runId: 'run-s', sourceTaskId: task.taskId })]);
        await driver.commitSamples(worker, [sampleRef('x1', { runId: 'run-s' })]);
        const leased = await driver.leaseTrainRefs(trainer, 1);
        await driver.ackTrainRefs(
          trainer,
          leased.map((r) => r.sampleId),
          { globalStep: 1, optimizerDurable: true },
        );
        await driver.leasePromptTasks(worker, 1);

        const s = await readClusterStatus(platform as Platform, { cluster: server.url, run: 'run-s', format: 'text' });
        assertDeepEqual(
          [
            s.promptsPending,
            s.promptsLeased,
            s.promptsCompleted,
            s.samplesCommitted,
            s.queueDepth,
            s.queueInFlight,
            s.durableAcked,
            s.trainBacklog,
            s.rolloutWorkers,
            s.trainers,
            s.durableGlobalStep,
          ],
          [1, 1, 1, 2, 1, 0, 1, 1, 1, 1, 1],
          'pending, leased, done prompts; committed, queued, leased, acked samples; backlog; members; step',
        );
        assertEqual(s.durable, true, 'durable server');
        const lines = formatClusterStatus(s);
        assert(lines[0].includes('durable: appendfsync always'), lines[0]);
        assert(
          lines.some((l) => l === 'durable ack: step 1 (optimizer state durable)'),
          lines.join('\n'),
        );
        const other = await readClusterStatus(platform as Platform, { cluster: server.url, run: 'run-other', format: 'json' });
        assertEqual(other.samplesCommitted, 0, 'runs are separate');
      } finally {
        await link.close();
        await server.stop();
      }
    },
    { only: ['node'] },
  );

  t.test(
    'a server without appendfsync always is reported as not durable',
    async ({ platform }) => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
      const server = await startRedisServer();
      try {
        const s = await readClusterStatus(platform as Platform, { cluster: server.url, run: 'r', format: 'text' });
        assertEqual(s.durable, false, 'not durable');
        assert(formatClusterStatus(s)[0].includes('NOT durable'), formatClusterStatus(s)[0]);
      } finally {
        await server.stop();
      }
    },
    { only: ['node'] },
  );
});
