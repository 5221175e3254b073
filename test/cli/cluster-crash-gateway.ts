/**
 * The gateway cases of the cluster crash matrix (test/cli/cluster-crash.ts): `speclab gateway`
 * SIGKILLed under a tab client (test/cli/tab-client.ts: src/training/cluster/tab-rollout.ts over the
 * WebSocket gateway, in Node), the only rollout worker of the first round, so every kill point is
 * one of the tab's: right after it registered, while it holds the whole first round leased
 * mid-capture (nothing committed), after its first commit, and once step 2 (trained on the tab's
 * samples) is durably acked. The tab must fail closed (exit 1 with one line naming the lost gateway,
 * no hang); the gateway starts again on the same port with the same token and a new tab client
 * (with a `speclab rollout` worker in the last case) finishes the run; its prompts held by the dead
 * tab come back when the run's prompt lease expires. Then the case's `verify`, as every case's.
 */
import type { RedisServer } from '../dataplane/redis-fixture.ts';
import type { CliProcess } from './cli-process.ts';
import { exitWithin, killAt, runCase, until, type Run, type StepRecord } from './cluster-crash-harness.ts';

interface GatewayPoint {
  readonly name: string;
  /** Prompts per capture of the tab (4: the whole first round in one lease). */
  readonly batch: number;
  /** Resolves at the kill point: a line the tab printed, or a ledger state. */
  wait(run: Run, tab: CliProcess): Promise<void>;
  /** What must hold at the kill (read from the ledger after the gateway is gone): a message, or ''. */
  check(status: Awaited<ReturnType<Run['status']>>, run: Run): string;
  /** A `speclab rollout` worker joins the restarted tab. */
  readonly withNode?: boolean;
}

const POINTS: GatewayPoint[] = [
  {
    name: 'after-tab-registered',
    batch: 2,
    wait: (_run, tab) => tab.waitFor(/joined run/),
    check: (s, run) => (s.samplesCommitted === 0 && run.tabCommitted() === 0 ? '' : `${s.samplesCommitted} committed`),
  },
  {
    name: 'tab-mid-capture-holding-a-lease',
    batch: 4,
    wait: (_run, tab) => tab.waitFor(/leased 4 /),
    check: (s, run) =>
      s.promptsLeased > 0 && s.samplesCommitted === 0 && run.tabCommitted() === 0
        ? ''
        : `${s.promptsLeased} leased, ${s.samplesCommitted} committed`,
  },
  {
    name: 'after-tab-first-commit',
    batch: 2,
    wait: (_run, tab) => tab.waitFor(/committed \d+ \(total/),
    check: (s, run) =>
      s.samplesCommitted >= 1 && s.samplesCommitted === run.tabCommitted() && !s.durableGlobalStep
        ? ''
        : `${s.samplesCommitted} committed (${run.tabCommitted()} by the tab), durable step ${s.durableGlobalStep}`,
  },
  {
    name: 'after-checkpoint-of-step-2-from-tab-samples',
    batch: 2,
    wait: (run) => until('durable ack of step 2', async () => (await run.status()).durableGlobalStep === 2),
    check: (s, run) =>
      s.durableAcked >= 4 && run.tabCommitted() >= 4 ? '' : `${s.durableAcked} durably acked, ${run.tabCommitted()} committed by the tab`,
    withNode: true,
  },
];

export async function gatewayCases(shared: RedisServer, reference: StepRecord[]): Promise<void> {
  for (const point of POINTS) {
    await runCase(`gateway-kill ${point.name}`, shared, reference, async (run) => {
      run.train();
      await run.gateway();
      const tab = run.tab('tab-1', point.batch);
      await point.wait(run, tab);
      await killAt(run.gatewayProcess!, 'gateway');
      const why = point.check(await run.status(), run);
      if (why !== '') throw new Error(`at the kill point: ${why}`);
      // The tab fails closed: exit 1 naming the gateway it lost, not a hang.
      run.rollouts.delete('tab-1');
      const te = await exitWithin(tab, 'the tab client', 30_000, 'the gateway died (it hangs instead of failing closed)');
      if (
        te.code !== 1 ||
        !/^tab-client: .*gateway \S+ closed the (control connection \(code 1006: connection lost|connection \(code 1006)/m.test(te.output)
      )
        throw new Error(
          `the tab client exited ${te.code} (${te.signal}) when the gateway died, want 1 with a line naming the gateway:\n${te.output.slice(-1500)}`,
        );
      await run.gateway();
      run.tab('tab-2', point.batch);
      if (point.withNode) run.rollout('b');
      await run.trainerExit();
      if (run.tabCommitted() === 0) throw new Error('no sample came from a tab');
      // Once the tabs are done, the gateway stops on an interrupt with exit 0.
      await exitWithin(run.rollouts.get('tab-2')!, 'the tab client', 30_000, 'the run finished');
      run.gatewayProcess!.signal('SIGINT');
      const ge = await exitWithin(run.gatewayProcess!, 'the gateway', 30_000, 'SIGINT');
      if (ge.code !== 0) throw new Error(`the gateway exited ${ge.code} (${ge.signal}) on SIGINT, want 0:\n${ge.output.slice(-1500)}`);
    });
  }
}
