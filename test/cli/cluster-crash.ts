/**
 * The crash matrix of a cluster run with real processes: one `speclab train --cluster` trainer, two
 * `speclab rollout` workers and a durable redis-server (appendfsync always) on the llama-tiny
 * fixture, 6 prompts × 2 epochs in rounds of 4, batch 2 (6 steps, three rounds, a durable ack
 * every 2 steps). An uninterrupted run first, then each case on a fresh run id:
 *   - rollout-kill: a worker SIGKILLed right after it joined, after its first and its second commit,
 *     and while it holds the whole first round leased mid-capture (its prompts come back when the
 *     run's 3 s prompt lease expires); the other worker finishes the run;
 *   - trainer-kill: the trainer SIGKILLed while it waits for the first round, after step 1, once the
 *     checkpoint of step 2 is durably acked, and at the last step's line; `train --out DIR --resume`
 *     continues while the rollouts keep running;
 *   - redis-kill: Redis SIGKILLed once step 2 is durably acked, after step 3, once step 4 is durably
 *     acked and after step 5, then started again from its AOF on the same port and dir; every process
 *     must fail closed (exit 1 or 0, no hang) and is restarted (the trainer with --resume).
 *     Also before the first step (after a worker's first commit) and after step 1 (the checkpoint of
 *     step 2 may be saved with its ack lost). The restarted trainer and workers start together;
 *   - redis-freeze (./cluster-crash-redis-freeze.ts): Redis SIGSTOPped after a worker's first commit,
 *     after step 1 and once step 2 is durably acked; every process must report within the command
 *     timeout plus a few seconds while Redis is still frozen, then after the thaw the run resumes;
 *   - gateway-kill (./cluster-crash-gateway.ts): `speclab gateway` SIGKILLed under a tab client
 *     (./tab-client.ts: src/training/cluster/tab-rollout.ts over the WebSocket gateway, in Node, so its
 *     features are byte-equal to a Node worker's), the only worker of the first round: right after
 *     it registered, while it holds the whole first round leased mid-capture (nothing committed),
 *     after its first commit, and once step 2 (trained on its samples) is durably acked. The tab
 *     must exit 1 naming the lost gateway (no hang); the gateway restarts on the same port with the
 *     same token, a new tab client (and in the last case a `speclab rollout` worker) finishes the run.
 * Each kill waits for a printed line (or a logged/leased state), never for a guessed time. Every case:
 * the trainer's last exit is 0; `speclab status` shows every sample committed and durably acked,
 * no backlog, no failed prompt; the final metrics.jsonl holds steps 1..6 once each unmarked, replays
 * only of steps past the durable step the resume started from, and every loss equals the
 * uninterrupted run's (relative 1e-6). Processes, waits and `verify`: ./cluster-crash-harness.ts.
 * Node-only; run by scripts/test-all.sh.  `tsx test/cli/cluster-crash.ts [case-name-substring]`
 */
import { rmSync } from 'node:fs';
import process from 'node:process';
import { startRedisServer } from '../dataplane/redis-fixture.ts';
import {
  exitWithin,
  killAt,
  report,
  root,
  Run,
  runCase,
  servers,
  started,
  tally,
  TOTAL_STEPS,
  trainRecords,
  until,
  verify,
  type StepRecord,
} from './cluster-crash-harness.ts';
import { gatewayCases } from './cluster-crash-gateway.ts';
import { redisFreezeCases } from './cluster-crash-redis-freeze.ts';

const T0 = performance.now();
try {
  const shared = await startRedisServer({ durable: true });
  servers.push(shared);

  // The uninterrupted run.
  let reference: StepRecord[] = [];
  {
    const t0 = performance.now();
    const run = new Run('reference', shared);
    run.rollout('a');
    run.rollout('b');
    run.train();
    const e = await run.trainerExit();
    reference = trainRecords(run.out);
    const problems: string[] = [];
    if (e.code !== 0 || reference.length !== TOTAL_STEPS)
      problems.push(`exit ${e.code}, ${reference.length} steps\n${e.output.slice(-2000)}`);
    else await verify(run, reference, problems);
    report('reference uninterrupted', problems, (performance.now() - t0) / 1000);
    if (problems.length > 0) throw new Error('no reference run');
  }

  // 1. A rollout worker SIGKILLed; the other one finishes the run.
  const joined = /joined run/;
  const commits = (n: number) => new RegExp(`committed \\d+ \\(total \\d+\\)(?:[\\s\\S]*committed \\d+ \\(total \\d+\\)){${n - 1}}`);
  for (const [point, pattern] of [
    ['after-join', joined],
    ['after-first-commit', commits(1)],
    ['after-second-commit', commits(2)],
  ] as const) {
    await runCase(`rollout-kill ${point}`, shared, reference, async (run) => {
      const a = run.rollout('a');
      run.rollout('b');
      run.train();
      await a.waitFor(pattern);
      await killAt(a, 'rollout a');
      run.rollouts.delete('a');
      await run.trainerExit();
    });
  }
  await runCase('rollout-kill mid-capture-holding-a-lease', shared, reference, async (run) => {
    // The only worker leases the whole first round (batch 4), is killed while it captures (holding
    // the lease, nothing committed), and a worker started after it gets the prompts once the lease expires.
    const a = run.rollout('a', 4);
    run.train();
    await a.waitFor(joined);
    await until('worker a holding leased prompts', async () => (await run.status()).promptsLeased > 0);
    if (/committed/.test(a.output())) throw new Error('worker a committed before the kill point');
    await killAt(a, 'rollout a');
    run.rollouts.delete('a');
    const s = await run.status();
    if (s.promptsLeased === 0 || s.samplesCommitted !== 0)
      throw new Error(`at the kill: ${s.promptsLeased} leased, ${s.samplesCommitted} committed`);
    run.rollout('b');
    await run.trainerExit();
  });

  // 2. The trainer SIGKILLed, then resumed; the rollouts keep running.
  const durable = (step: number) => (run: Run) =>
    until(`durable ack of step ${step}`, async () => (await run.status()).durableGlobalStep === step);
  const trainerPoints: [string, (run: Run) => Promise<void>][] = [
    ['waiting-for-round-1', (run) => run.trainer.waitFor(/phase train: /)],
    ['after-step-1', (run) => run.trainer.waitFor(/step 1\/6/)],
    ['after-checkpoint-of-step-2', durable(2)],
    ['at-last-step', (run) => run.trainer.waitFor(/step 6\/6/)],
  ];
  for (const [point, wait] of trainerPoints) {
    await runCase(`trainer-kill ${point}`, shared, reference, async (run) => {
      run.rollout('a');
      run.rollout('b');
      run.train();
      await wait(run);
      await killAt(run.trainer, 'trainer');
      run.trainerExits.push(await run.trainer.exited);
      run.resume();
      await run.trainerExit();
    });
  }

  // 3. Redis SIGKILLed and started again from its AOF; processes that failed closed are restarted.
  const redisPoints: [string, (run: Run) => Promise<void>][] = [
    // Before the first step: the run exists only in Redis, and the trainer's --out is kept for --resume.
    ['after-first-commit', (run) => run.rollouts.get('a')!.waitFor(commits(1))],
    // The checkpoint of step 2 may be saved with its ack lost: the run then starts over.
    ['after-step-1', (run) => run.trainer.waitFor(/step 1\/6/)],
    ['after-checkpoint-of-step-2', durable(2)],
    ['after-step-3', (run) => run.trainer.waitFor(/step 3\/6/)],
    ['after-checkpoint-of-step-4', durable(4)],
    ['after-step-5', (run) => run.trainer.waitFor(/step 5\/6/)],
  ];
  for (const [point, wait] of redisPoints) {
    await runCase(`redis-kill ${point}`, undefined, reference, async (run) => {
      run.rollout('a');
      run.rollout('b');
      run.train();
      await wait(run);
      const { port, dir } = run.server;
      await run.server.kill();
      // Every process fails closed: exit 1, no hang.
      const te = await exitWithin(run.trainer, 'the trainer', 30_000);
      run.trainerExits.push(te);
      if (te.code !== 1)
        throw new Error(`the trainer exited ${te.code} (${te.signal}) when Redis died, want 1:\n${te.output.slice(-1500)}`);
      const dead: string[] = [];
      for (const [id, p] of run.rollouts) {
        const e = await exitWithin(p, `rollout ${id}`, 30_000);
        if (e.code !== 1 && e.code !== 0)
          throw new Error(`rollout ${id} exited ${e.code} (${e.signal}) when Redis died:\n${e.output.slice(-1500)}`);
        dead.push(id);
      }
      const again = await startRedisServer({ durable: true, dir, port });
      servers.splice(servers.indexOf(run.server), 1, again); // stop() removes the dir: only the last server on it
      run.server = again;
      // Everything restarts at once: workers may commit while the resume reads the ledger.
      run.resume();
      for (const id of dead) run.rollout(id);
      await run.trainerExit();
    });
  }

  // 3b. Redis frozen (SIGSTOP): every process reports within the command timeout, then the run resumes.
  await redisFreezeCases(reference);

  // 4. The gateway SIGKILLed under a tab client (test/cli/tab-client.ts), then started again.
  await gatewayCases(shared, reference);
} catch (err) {
  report('cluster crash matrix', [(err as Error).stack ?? String(err)], (performance.now() - T0) / 1000);
} finally {
  for (const p of started) p.kill();
  for (const s of servers) await s.stop().catch(() => undefined);
  rmSync(root, { recursive: true, force: true });
}
const { passed, failed, worstRel } = tally();
const total = passed + failed;
console.log(
  `cluster crash matrix: ${total} cases, ${passed} passed in ${((performance.now() - T0) / 1000).toFixed(0)} s; worst relative loss difference ${worstRel.toExponential(2)}`,
);
console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
