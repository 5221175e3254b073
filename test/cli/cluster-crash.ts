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
 *     step 2 may be saved with its ack lost). The restarted trainer and workers start together.
 * Each kill waits for a printed line (or a logged/leased state), never for a guessed time. Every case:
 * the trainer's last exit is 0; `speclab status` shows every sample committed and durably acked,
 * no backlog, no failed prompt; the final metrics.jsonl holds steps 1..6 once each unmarked, replays
 * only of steps past the durable step the resume started from, and every loss equals the
 * uninterrupted run's (relative 1e-6). The gateway role has no cluster-rollout endpoints: not here.
 * Node-only; run by scripts/test-all.sh.  `tsx test/cli/cluster-crash.ts [case-name-substring]`
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { readClusterStatus } from '../../src/cli/status.ts';
import type { Platform } from '../../src/cli/platform.ts';
import { connectRedis } from '../../src/platform/redis-node.ts';
import { startRedisServer, type RedisServer } from '../dataplane/redis-fixture.ts';
import { startCli, type CliProcess } from './cli-process.ts';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const target = resolve(repo, process.env.SPECLAB_FIXTURES ?? '../shared/fixtures', 'hf/llama-tiny');
const root = mkdtempSync(join(tmpdir(), 'speclab-cluster-crash-'));
const TOTAL_STEPS = 6;
const TOTAL_SAMPLES = 12;
const LEASE_MS = 3000;
const FLAGS = ['--target', target, '--train-prompts', '6', '--eval-prompts', '1', '--response-length', '12', '--epochs', '2', '--round-prompts', '4', '--batch-size', '2', '--lr', '1e-2', '--max-new-tokens', '8', '--eval-train-prompts', '0', '--eval-every', '0', '--checkpoint-every', '2', '--log-every', '1', '--seed', '3', '--prompt-lease-ms', String(LEASE_MS)];
const PROCESS_MS = 180_000;
/** Run only the cases whose name contains this (after the uninterrupted reference run). */
const ONLY = process.argv[2];
const started: CliProcess[] = [];
const servers: RedisServer[] = [];

interface StepRecord {
  step: number;
  loss: number;
  replay?: boolean;
}

function trainRecords(out: string): StepRecord[] {
  if (!existsSync(join(out, 'metrics.jsonl'))) return [];
  return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"phase":"train"'))
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as StepRecord & { checkpointed?: boolean }];
      } catch {
        return []; // a line cut by the kill
      }
    });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `ready` every 5 ms; an error naming `what` after `timeoutMs`. */
async function until(what: string, ready: () => boolean | Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

function cli(args: string[]): CliProcess {
  const p = startCli(args, PROCESS_MS);
  started.push(p);
  return p;
}

/** Exit of `p`, or an error naming it when it has not ended within `ms` (a hang). */
async function exitWithin(p: CliProcess, name: string, ms: number, after = 'Redis died (it hangs instead of failing closed)'): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> {
  const timer = sleep(ms).then(() => 'hang' as const);
  const r = await Promise.race([p.exited, timer]);
  if (r === 'hang') {
    p.kill();
    throw new Error(`${name} did not exit within ${ms} ms after ${after}:\n${p.output().slice(-1500)}`);
  }
  return r;
}

const statusPlatform = { name: 'node', connectRedis: (url: string) => connectRedis(url) } as unknown as Platform;

class Run {
  readonly out: string;
  readonly cluster: string[];
  trainer!: CliProcess;
  readonly rollouts = new Map<string, CliProcess>();
  /** Every trainer process's exit, in order. */
  readonly trainerExits: { code: number | null; signal: NodeJS.Signals | null; output: string }[] = [];

  constructor(
    readonly name: string,
    public server: RedisServer,
  ) {
    this.out = join(root, name);
    this.cluster = ['--cluster', server.url, '--run', name];
  }

  rollout(id: string, batch = 2): CliProcess {
    const p = cli(['rollout', ...this.cluster, '--target', target, '--batch', String(batch), '--poll-ms', '10', '--worker-id', id, '--wait-ms', '90000']);
    this.rollouts.set(id, p);
    return p;
  }

  train(): CliProcess {
    this.trainer = cli(['train', ...FLAGS, '--out', this.out, ...this.cluster]);
    return this.trainer;
  }

  resume(): CliProcess {
    this.trainer = cli(['train', '--out', this.out, '--resume']);
    return this.trainer;
  }

  async trainerExit(): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> {
    const e = await this.trainer.exited;
    this.trainerExits.push(e);
    return e;
  }

  status() {
    return readClusterStatus(statusPlatform, { cluster: this.server.url, run: this.name, format: 'json' });
  }

  logged(pred: (r: StepRecord & { checkpointed?: boolean }) => boolean): boolean {
    return trainRecords(this.out).some(pred);
  }
}

let passed = 0;
let failed = 0;
let worstRel = 0;
const timings: string[] = [];

function report(name: string, problems: string[], seconds: number): void {
  if (problems.length === 0) passed++;
  else failed++;
  timings.push(`${name} ${seconds.toFixed(1)}s`);
  console.log(`${problems.length === 0 ? 'ok  ' : 'not ok'} ${name} (${seconds.toFixed(1)} s)${problems.length === 0 ? '' : `\n    ${problems.join('\n    ')}`}`);
}

/** The assertions every case ends with, on a run whose trainer has ended for the last time. */
async function verify(run: Run, reference: StepRecord[], problems: string[]): Promise<void> {
  const last = run.trainerExits.at(-1);
  if (last?.code !== 0) problems.push(`the trainer's final exit is ${last?.code ?? 'none'} (${last?.signal ?? ''}):\n${last?.output.slice(-2000)}`);
  // The workers still running exit 0 once the run is finished.
  for (const [id, p] of run.rollouts) {
    const e = await exitWithin(p, `rollout ${id}`, 30_000, 'the trainer ended').catch((err: Error) => ({ code: -1, signal: null, output: err.message }));
    if (e.code !== 0) problems.push(`rollout ${id} exited ${e.code} (${e.signal}), want 0 once the run is finished:\n${e.output.slice(-1500)}`);
  }
  // `speclab status`, the command a person runs.
  const st = cli(['status', ...run.cluster, '--format', 'json']);
  const se = await st.exited;
  try {
    const s = JSON.parse(se.output.trim().split('\n').at(-1) ?? '') as Record<string, number>;
    const want = { samplesCommitted: TOTAL_SAMPLES, durableAcked: TOTAL_SAMPLES, trainBacklog: 0, promptsFailed: 0, durableGlobalStep: TOTAL_STEPS };
    for (const [k, v] of Object.entries(want)) if (s[k] !== v) problems.push(`status ${k} = ${s[k]}, want ${v}`);
  } catch {
    problems.push(`speclab status did not print JSON (exit ${se.code}):\n${se.output.slice(-1000)}`);
  }
  // Steps 1..N once each unmarked; replays only past the durable step each resume started from; losses of the reference.
  const records = trainRecords(run.out);
  const plain = records.filter((r) => !r.replay);
  const steps = plain.map((r) => r.step).join(',');
  const want = reference.map((r) => r.step).join(',');
  if (steps !== want) problems.push(`unmarked steps ${steps}, want ${want}`);
  const resumedFrom = run.trainerExits.slice(1).map((e) => Number(/resuming after step (\d+)/.exec(e.output)?.[1] ?? 0));
  const minResume = resumedFrom.length > 0 ? Math.min(...resumedFrom) : TOTAL_STEPS;
  for (const r of records.filter((x) => x.replay)) if (r.step <= minResume) problems.push(`step ${r.step} trained again although durable (resumes from ${resumedFrom.join(', ')})`);
  for (const r of records) {
    const ref = reference.find((x) => x.step === r.step);
    if (!ref) continue;
    const rel = Math.abs(r.loss - ref.loss) / Math.max(Math.abs(ref.loss), 1e-12);
    worstRel = Math.max(worstRel, rel);
    if (rel > 1e-6) problems.push(`step ${r.step}${r.replay ? ' (replay)' : ''}: loss ${r.loss} vs reference ${ref.loss} (relative ${rel.toExponential(2)})`);
  }
}

async function runCase(name: string, server: RedisServer | undefined, reference: StepRecord[], body: (run: Run) => Promise<void>): Promise<void> {
  if (ONLY !== undefined && !name.includes(ONLY)) return;
  const t0 = performance.now();
  const problems: string[] = [];
  const srv = server ?? (await startRedisServer({ durable: true }));
  if (!server) servers.push(srv);
  const run = new Run(name.replace(/[^\w-]/g, '-'), srv);
  try {
    await body(run);
    await verify(run, reference, problems);
  } catch (err) {
    problems.push((err as Error).message);
  } finally {
    for (const p of [run.trainer, ...run.rollouts.values()]) p?.kill();
  }
  report(name, problems, (performance.now() - t0) / 1000);
}

/** SIGKILLs `p` and waits for it to be gone; an error when it had already exited (the kill point was missed). */
async function killAt(p: CliProcess, what: string): Promise<void> {
  p.kill();
  const e = await p.exited;
  if (e.signal !== 'SIGKILL') throw new Error(`${what}: the process had already ended (exit ${e.code}) before the kill point:\n${e.output.slice(-1500)}`);
}

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
    if (e.code !== 0 || reference.length !== TOTAL_STEPS) problems.push(`exit ${e.code}, ${reference.length} steps\n${e.output.slice(-2000)}`);
    else await verify(run, reference, problems);
    report('reference uninterrupted', problems, (performance.now() - t0) / 1000);
    if (problems.length > 0) throw new Error('no reference run');
  }

  // 1. A rollout worker SIGKILLed; the other one finishes the run.
  const joined = /joined run/;
  const commits = (n: number) => new RegExp(`committed \\d+ \\(total \\d+\\)(?:[\\s\\S]*committed \\d+ \\(total \\d+\\)){${n - 1}}`);
  for (const [point, pattern] of [['after-join', joined], ['after-first-commit', commits(1)], ['after-second-commit', commits(2)]] as const) {
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
    if (s.promptsLeased === 0 || s.samplesCommitted !== 0) throw new Error(`at the kill: ${s.promptsLeased} leased, ${s.samplesCommitted} committed`);
    run.rollout('b');
    await run.trainerExit();
  });

  // 2. The trainer SIGKILLed, then resumed; the rollouts keep running.
  const durable = (step: number) => (run: Run) => until(`durable ack of step ${step}`, async () => (await run.status()).durableGlobalStep === step);
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
      if (te.code !== 1) throw new Error(`the trainer exited ${te.code} (${te.signal}) when Redis died, want 1:\n${te.output.slice(-1500)}`);
      const dead: string[] = [];
      for (const [id, p] of run.rollouts) {
        const e = await exitWithin(p, `rollout ${id}`, 30_000);
        if (e.code !== 1 && e.code !== 0) throw new Error(`rollout ${id} exited ${e.code} (${e.signal}) when Redis died:\n${e.output.slice(-1500)}`);
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
} catch (err) {
  failed++;
  console.log(`not ok cluster crash matrix: ${(err as Error).stack ?? String(err)}`);
} finally {
  for (const p of started) p.kill();
  for (const s of servers) await s.stop().catch(() => undefined);
  rmSync(root, { recursive: true, force: true });
}
const total = passed + failed;
console.log(`cluster crash matrix: ${total} cases, ${passed} passed in ${((performance.now() - T0) / 1000).toFixed(0)} s; worst relative loss difference ${worstRel.toExponential(2)}`);
console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
