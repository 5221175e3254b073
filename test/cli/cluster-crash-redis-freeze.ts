/**
 * The frozen-Redis cases of the cluster crash matrix (test/cli/cluster-crash.ts): redis-server
 * SIGSTOPped under a running cluster (after a worker's first commit, after step 1, once step 2 is
 * durably acked), for FREEZE_MS, with every SpecLab process given a command timeout well under the
 * freeze (SPECLAB_REDIS_TIMEOUT_MS). The trainer and both workers must report within the command
 * timeout plus a few seconds, while Redis is still frozen: the trainer exits 1 naming the server,
 * the workers exit 1 or 0, none waits for the thaw. Then Redis is thawed (SIGCONT), the trainer
 * resumes with --resume and the workers start again, and the case's `verify` compares every loss
 * with the uninterrupted run's, as every case does.
 *
 * SPECLAB_TEST_REDIS_FREEZE_MS and SPECLAB_TEST_REDIS_TIMEOUT_MS set the freeze and the command
 * timeout (default 20 s and 4 s); 60000 and 30000 run a minute's freeze under the default timeout,
 * where every process must report within 40 s.
 */
import process from 'node:process';
import { exitWithin, runCase, until, type Run, type StepRecord } from './cluster-crash-harness.ts';
import type { ProcessExit } from './cli-process.ts';

const FREEZE_MS = Number(process.env.SPECLAB_TEST_REDIS_FREEZE_MS ?? 20_000);
const COMMAND_TIMEOUT_MS = Number(process.env.SPECLAB_TEST_REDIS_TIMEOUT_MS ?? 4000);
/**
 * What a report may take past the command timeout: the work a process was doing when Redis froze (a
 * worker's first capture compiles its shaders, seconds on a CPU adapter) before its next call starts
 * the timeout, the failed call's cleanup and the exit. The bound: 60 s frozen, 30 s timeout,
 * every process reports within 40 s.
 */
const REPORT_SLACK_MS = 10_000;
// A process that waits for the thaw must miss the deadline: the freeze outlasts it by a clear margin.
if (COMMAND_TIMEOUT_MS + REPORT_SLACK_MS + 3000 > FREEZE_MS)
  throw new Error(
    `SPECLAB_TEST_REDIS_FREEZE_MS ${FREEZE_MS} must exceed the command timeout ${COMMAND_TIMEOUT_MS} + ${REPORT_SLACK_MS + 3000} ms`,
  );

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const POINTS: [string, (run: Run) => Promise<void>][] = [
  ['after-first-commit', (run) => run.rollouts.get('a')!.waitFor(/committed \d+ \(total \d+\)/)],
  ['after-step-1', (run) => run.trainer.waitFor(/step 1\/6/)],
  ['after-checkpoint-of-step-2', (run) => until('durable ack of step 2', async () => (await run.status()).durableGlobalStep === 2)],
];

export async function redisFreezeCases(reference: StepRecord[]): Promise<void> {
  for (const [point, wait] of POINTS) {
    await runCase(`redis-freeze ${point}`, undefined, reference, async (run) => {
      run.env = { SPECLAB_REDIS_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS) };
      run.rollout('a');
      run.rollout('b');
      run.train();
      await wait(run);
      run.server.signal('SIGSTOP');
      const frozenAt = performance.now();
      const within = COMMAND_TIMEOUT_MS + REPORT_SLACK_MS;
      const after = `Redis froze (command timeout ${COMMAND_TIMEOUT_MS} ms; it waits for the thaw instead of failing)`;
      let exits: ProcessExit[];
      try {
        exits = await Promise.all([
          exitWithin(run.trainer, 'the trainer', within, after),
          ...[...run.rollouts].map(([id, p]) => exitWithin(p, `rollout ${id}`, within, after)),
        ]);
      } finally {
        // Thawed at the end of the freeze, never earlier: a process that only fails after the thaw is caught.
        await sleep(Math.max(0, FREEZE_MS - (performance.now() - frozenAt)));
        run.server.signal('SIGCONT');
      }
      const [te, ...workers] = exits;
      run.trainerExits.push(te);
      if (te.code !== 1 || !/Redis at redis:\/\/\S+: no answer within \d+ ms, connection lost/.test(te.output))
        throw new Error(
          `the trainer exited ${te.code} (${te.signal}) under a frozen Redis, want 1 naming the server:\n${te.output.slice(-1500)}`,
        );
      for (const [i, e] of workers.entries())
        if (e.code !== 1 && e.code !== 0)
          throw new Error(`rollout ${i} exited ${e.code} (${e.signal}) under a frozen Redis:\n${e.output.slice(-1500)}`);
      const ids = [...run.rollouts.keys()];
      run.resume();
      for (const id of ids) run.rollout(id);
      await run.trainerExit();
    });
  }
}
