/**
 * One behavioural contract for every PromptLedger (src/control/control-stores.ts): the in-memory
 * PromptBook and the Redis ledger must agree on ownership checks, bounded attempts, lease expiry
 * with attempt + 1 (and its reason), commits that finish a task, completion, the per-worker cap and
 * idempotent ingest (ported from test/control/prompts.test.ts, at the ledger rather than the
 * controller, against the async interface).
 *
 * `env` sets up an empty store and returns `open`, which builds a ledger over it with the given
 * options (an injected clock lets expiry checks run without sleeping), and a cleanup.
 */
import type { SuiteBuilder, TestContext } from '../harness/suite.ts';
import { assertDeepEqual, assertEqual } from '../harness/assert.ts';
import type { PromptLedger } from '../../src/control/control-stores.ts';
import { makePromptTask, type PromptTask } from '../../src/contracts/records.ts';
import type { RuntimeName } from '../../src/ports/runtime.ts';
import { promptTask } from '../contracts/fixtures.ts';

export interface PromptLedgerOpenOptions {
  leaseTimeoutMs: number | null;
  maxAttempts: number | null;
  maxLeasePerWorker: number | null;
  /** Milliseconds; when given it is the only clock lease ages are measured on. */
  clock?: () => number;
}

export interface PromptLedgerEnv {
  /** A ledger over this environment's store (empty when the check starts). */
  open(options: PromptLedgerOpenOptions): PromptLedger | Promise<PromptLedger>;
  cleanup(): Promise<void>;
}

export type PromptLedgerEnvFactory = (ctx: TestContext) => Promise<PromptLedgerEnv>;

const W = 'rollout-a';
const OTHER = 'rollout-b';
const tasks = (...taskIds: string[]): PromptTask[] => taskIds.map((id) => promptTask(id));
const taskIds = (list: readonly PromptTask[]): string[] => list.map((x) => x.taskId);
const countsOf = async (ledger: PromptLedger): Promise<number[]> => {
  const c = await ledger.counts();
  return [c.prompts, c.pending, c.leased, c.failed, c.completed];
};

export function promptLedgerConformance(
  t: SuiteBuilder,
  label: string,
  env: PromptLedgerEnvFactory,
  options: { only?: readonly RuntimeName[] } = {},
): void {
  const check = (
    name: string,
    body: (ledger: PromptLedger, clock: { now: number }) => Promise<void>,
    open: Partial<PromptLedgerOpenOptions> = {},
  ): void => {
    t.test(
      `${label}: ${name}`,
      async (ctx) => {
        const e = await env(ctx);
        try {
          const clock = { now: 0 };
          const ledger = await e.open({
            leaseTimeoutMs: null,
            maxAttempts: null,
            maxLeasePerWorker: null,
            clock: () => clock.now,
            ...open,
          });
          await body(ledger, clock);
        } finally {
          await e.cleanup();
        }
      },
      { only: options.only },
    );
  };

  check('lease hands out tasks in ingest order; task() and counts() follow', async (ledger) => {
    await ledger.add(tasks('t0', 't1', 't2'));
    assertDeepEqual(taskIds(await ledger.lease(W, 2)), ['t0', 't1'], 'FIFO');
    assertDeepEqual(await ledger.task('t2'), promptTask('t2'), 'the record read back equals the one added');
    assertEqual(await ledger.task('nope'), undefined, 'unknown task');
    assertDeepEqual(await countsOf(ledger), [3, 1, 2, 0, 0], '[prompts, pending, leased, failed, completed]');
    assertDeepEqual(await ledger.lease(W, 0), [], 'maxTasks 0');
  });

  check('failing a task leased by another worker is ignored (ownership check)', async (ledger) => {
    await ledger.add(tasks('t0'));
    await ledger.lease(W, 1);
    assertDeepEqual(
      await ledger.fail(OTHER, ['t0', 'nope'], 'not mine', false),
      { requeued: [], failed: [], skipped: ['t0', 'nope'] },
      'skipped',
    );
    assertEqual((await ledger.failuresList()).length, 0, 'no failure recorded');
    assertDeepEqual((await ledger.fail(W, ['t0'], 'oom', true)).requeued, ['t0'], 'owner may fail it');
    assertDeepEqual(
      await ledger.fail(W, ['t0'], 'oom', true),
      { requeued: [], failed: [], skipped: ['t0'] },
      "a pending task is nobody's to fail",
    );
  });

  check(
    'retries are bounded by maxAttempts',
    async (ledger) => {
      await ledger.add(tasks('t0'));
      await ledger.lease(W, 1);
      assertDeepEqual((await ledger.fail(W, ['t0'], 'engine crash', true)).requeued, ['t0'], 'first failure retried');
      const [again] = await ledger.lease(W, 1);
      assertEqual(again.attempt, 1, 'attempt incremented');
      assertEqual((await ledger.task('t0'))?.attempt, 1, 'task() shows the attempt too');
      assertDeepEqual((await ledger.fail(W, ['t0'], 'engine crash', true)).failed, ['t0'], 'second failure terminal');
      assertDeepEqual(
        await ledger.failuresList(),
        [{ taskId: 't0', reason: 'engine crash (attempts exhausted: 2)', attempt: 1 }],
        'terminal record',
      );
      assertEqual(await ledger.task('t0'), undefined, 'terminal task record dropped');
      assertDeepEqual(await countsOf(ledger), [0, 0, 0, 1, 0], 'counts');
    },
    { maxAttempts: 2 },
  );

  check('a terminal failure keeps its reason verbatim; re-adding the task clears it', async (ledger) => {
    await ledger.add(tasks('t0', 't1'));
    await ledger.lease(W, 2);
    assertDeepEqual(
      await ledger.fail(W, ['t1', 't0', 't1'], 'bad prompt', false),
      { requeued: [], failed: ['t1', 't0'], skipped: ['t1'] },
      'repeat skipped',
    );
    assertDeepEqual(
      await ledger.failuresList(),
      [
        { taskId: 't1', reason: 'bad prompt', attempt: 0 },
        { taskId: 't0', reason: 'bad prompt', attempt: 0 },
      ],
      'in failure order',
    );
    await ledger.add(tasks('t1'));
    assertDeepEqual(
      (await ledger.failuresList()).map((f) => f.taskId),
      ['t0'],
      't1 is pending again',
    );
    assertDeepEqual(taskIds(await ledger.lease(W, 5)), ['t1'], 'and can be leased');
  });

  check(
    'an expired prompt lease goes back to pending with attempt + 1',
    async (ledger, clock) => {
      clock.now = 1_000;
      await ledger.add(tasks('t0', 't1'));
      await ledger.lease(W, 1);
      clock.now = 1_400;
      assertDeepEqual(taskIds(await ledger.lease(OTHER, 5)), ['t1'], 'not yet expired');
      clock.now = 1_500;
      const [reclaimed] = await ledger.lease(OTHER, 5);
      assertDeepEqual([reclaimed.taskId, reclaimed.attempt], ['t0', 1], "dead worker's task reclaimed");
      assertDeepEqual((await ledger.fail(W, ['t0'], 'late', true)).skipped, ['t0'], 'the dead worker no longer owns it');
      clock.now = 2_000; // both leases of rollout-b expire: t1 (attempt 0 → 1), t0 (attempt 1 → 2)
      const again = await ledger.lease(W, 5);
      assertDeepEqual(
        again.map((x) => [x.taskId, x.attempt]),
        [
          ['t1', 1],
          ['t0', 2],
        ],
        'expired again, requeued in lease order',
      );
      clock.now = 2_500;
      assertDeepEqual(taskIds(await ledger.lease(W, 5)), ['t1'], 't0 exhausted its 3 attempts');
      assertEqual(
        (await ledger.failuresList())[0].reason,
        'prompt lease of worker rollout-a expired after 500 ms (attempts exhausted: 3)',
        'expiry reason',
      );
    },
    { leaseTimeoutMs: 500, maxAttempts: 3 },
  );

  check(
    'a fresh commit finishes a task even after its lease expired',
    async (ledger, clock) => {
      await ledger.add(tasks('t0'));
      await ledger.lease(W, 1);
      clock.now = 20;
      await ledger.lease(W, 0); // reclaims: t0 is pending again
      await ledger.committed(W, [{ taskId: 't0', fresh: true }]);
      assertDeepEqual(await countsOf(ledger), [0, 0, 0, 0, 1], 'retired, not leased again');
      assertDeepEqual(await ledger.lease(W, 5), [], 'nothing left to lease');
    },
    { leaseTimeoutMs: 10 },
  );

  check("a duplicate commit ends only the committing worker's own lease", async (ledger) => {
    await ledger.add(tasks('t0', 't1', 't2'));
    await ledger.lease(W, 1);
    await ledger.lease(OTHER, 1);
    await ledger.committed(W, [{ taskId: 't1', fresh: false }]);
    assertDeepEqual(await countsOf(ledger), [3, 1, 2, 0, 0], "another worker's lease is kept");
    await ledger.committed(W, [{ taskId: 't2', fresh: false }]);
    assertEqual((await ledger.counts()).pending, 1, 'a pending task is kept');
    await ledger.committed(W, [{ taskId: 't0', fresh: false }]);
    assertDeepEqual(await countsOf(ledger), [2, 1, 1, 0, 1], 'own lease retired');
    await ledger.committed(W, [{ taskId: 'nope', fresh: true }]);
    await ledger.committed(W, [{ taskId: 't0', fresh: true }]);
    assertEqual((await ledger.counts()).completed, 1, 'unknown and already-finished tasks are no-ops');
  });

  check('complete retires leased tasks without a ref; others are ignored', async (ledger) => {
    await ledger.add(tasks('t0', 't1', 't2'));
    await ledger.lease(W, 2);
    assertDeepEqual(await ledger.complete(OTHER, ['t0']), [], 'not the owner');
    assertDeepEqual(await ledger.complete(W, ['t0', 't2', 'zz']), ['t0'], 'only the leased one');
    assertDeepEqual(await countsOf(ledger), [2, 1, 1, 0, 1], 'counts');
  });

  check(
    'per-worker prompt lease cap',
    async (ledger) => {
      await ledger.add(tasks('a', 'b', 'c', 'd', 'e'));
      assertEqual((await ledger.lease(W, 2)).length, 2, 'under the cap');
      assertEqual((await ledger.lease(W, 5)).length, 1, 'topped up to the cap');
      assertEqual((await ledger.lease(W, 5)).length, 0, 'at the cap');
      assertEqual((await ledger.lease(OTHER, 5)).length, 2, 'cap is per worker');
      await ledger.complete(W, ['a']);
      assertDeepEqual(taskIds(await ledger.lease(W, 5)), [], 'nothing pending, though one slot is free');
      await ledger.add(tasks('f'));
      assertDeepEqual(taskIds(await ledger.lease(W, 5)), ['f'], 'a finished task frees its slot');
    },
    { maxLeasePerWorker: 3 },
  );

  check('add is idempotent on tasks pending or leased', async (ledger) => {
    await ledger.add(tasks('t0', 't1', 't0'));
    assertEqual((await ledger.counts()).pending, 2, 'a repeat within one add is skipped');
    await ledger.lease(W, 1);
    const changed = makePromptTask({ ...promptTask('t0'), maxLength: 7, attempt: 4 });
    await ledger.add([changed, makePromptTask({ ...promptTask('t1'), maxLength: 7 })]);
    assertEqual((await ledger.task('t0'))?.maxLength, 2048, 'the leased record is left as it is');
    assertEqual((await ledger.task('t1'))?.maxLength, 2048, 'the pending record is left as it is');
    assertDeepEqual(await countsOf(ledger), [2, 1, 1, 0, 0], 'counts unchanged');
  });

  check('concurrent leases never hand one task to two workers', async (ledger) => {
    await ledger.add(tasks(...Array.from({ length: 24 }, (_, i) => `c${i}`)));
    const got = await Promise.all(Array.from({ length: 6 }, (_, i) => ledger.lease(`w${i}`, 5)));
    const all = got.flat().map((x) => x.taskId);
    assertEqual(all.length, 24, 'every task leased');
    assertEqual(new Set(all).size, 24, 'none leased twice');
  });
}
