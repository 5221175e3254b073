/**
 * The pieces of the cluster crash matrix (test/cli/cluster-crash.ts): the run's settings, its
 * processes (trainer, `speclab rollout` workers, `speclab gateway` and tab clients,
 * test/cli/tab-client.ts), the waits on printed lines and ledger states, and the assertions every
 * case ends with (`verify`). Node-only.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { readClusterStatus } from '../../src/cli/status.ts';
import type { Platform } from '../../src/cli/platform.ts';
import { newGatewayToken } from '../../src/platform/dataplane-gateway-node.ts';
import { connectRedis } from '../../src/platform/redis-node.ts';
import { startRedisServer, type RedisServer } from '../dataplane/redis-fixture.ts';
import { startCli, startNode, type CliProcess, type ProcessExit } from './cli-process.ts';

const repo = fileURLToPath(new URL('../..', import.meta.url));
export const target = resolve(repo, process.env.SPECLAB_FIXTURES ?? '../shared/fixtures', 'hf/llama-tiny');
export const root = mkdtempSync(join(tmpdir(), 'speclab-cluster-crash-'));
export const TOTAL_STEPS = 6;
export const TOTAL_SAMPLES = 12;
const LEASE_MS = 3000;
const FLAGS = [
  '--target',
  target,
  '--train-prompts',
  '6',
  '--eval-prompts',
  '1',
  '--response-length',
  '12',
  '--epochs',
  '2',
  '--round-prompts',
  '4',
  '--batch-size',
  '2',
  '--lr',
  '1e-2',
  '--max-new-tokens',
  '8',
  '--eval-train-prompts',
  '0',
  '--eval-every',
  '0',
  '--checkpoint-every',
  '2',
  '--log-every',
  '1',
  '--seed',
  '3',
  '--prompt-lease-ms',
  String(LEASE_MS),
];
const PROCESS_MS = 180_000;
export const started: CliProcess[] = [];
export const servers: RedisServer[] = [];

export interface StepRecord {
  step: number;
  loss: number;
  replay?: boolean;
}

export function trainRecords(out: string): StepRecord[] {
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
export async function until(what: string, ready: () => boolean | Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

function cli(args: string[], env?: Readonly<Record<string, string>>): CliProcess {
  const p = startCli(args, PROCESS_MS, env);
  started.push(p);
  return p;
}

/** test/cli/tab-client.ts as a child process, with the output and exit a CliProcess gives. */
function tabClient(args: string[]): CliProcess {
  const p = startNode(['--import', 'tsx', 'test/cli/tab-client.ts', ...args], { name: 'the tab client', timeoutMs: PROCESS_MS, pollMs: 5 });
  started.push(p);
  return p;
}

/** Exit of `p`, or an error naming it when it has not ended within `ms` (a hang). */
export async function exitWithin(
  p: CliProcess,
  name: string,
  ms: number,
  after = 'Redis died (it hangs instead of failing closed)',
): Promise<ProcessExit> {
  const timer = sleep(ms).then(() => 'hang' as const);
  const r = await Promise.race([p.exited, timer]);
  if (r === 'hang') {
    p.kill();
    throw new Error(`${name} did not exit within ${ms} ms after ${after}:\n${p.output().slice(-1500)}`);
  }
  return r;
}

const statusPlatform = { name: 'node', connectRedis: (url: string) => connectRedis(url) } as unknown as Platform;

export class Run {
  readonly out: string;
  readonly cluster: string[];
  trainer!: CliProcess;
  /** Every worker still expected to finish the run (speclab rollout and tab clients), by id. */
  readonly rollouts = new Map<string, CliProcess>();
  /** Every trainer process's exit, in order. */
  readonly trainerExits: ProcessExit[] = [];
  gatewayProcess?: CliProcess;
  gatewayUrl = '';
  /** Environment variables of the trainer and `speclab rollout` processes (e.g. SPECLAB_REDIS_TIMEOUT_MS). */
  env: Readonly<Record<string, string>> = {};
  /** Every tab client started, in order (also those killed or failed). */
  readonly tabs: CliProcess[] = [];
  private tokenFile?: string;

  constructor(
    readonly name: string,
    public server: RedisServer,
  ) {
    this.out = join(root, name);
    this.cluster = ['--cluster', server.url, '--run', name];
  }

  rollout(id: string, batch = 2): CliProcess {
    const p = cli(
      [
        'rollout',
        ...this.cluster,
        '--target',
        target,
        '--batch',
        String(batch),
        '--poll-ms',
        '10',
        '--worker-id',
        id,
        '--wait-ms',
        '90000',
      ],
      this.env,
    );
    this.rollouts.set(id, p);
    return p;
  }

  train(): CliProcess {
    this.trainer = cli(['train', ...FLAGS, '--out', this.out, ...this.cluster], this.env);
    return this.trainer;
  }

  resume(): CliProcess {
    this.trainer = cli(['train', '--out', this.out, '--resume'], this.env);
    return this.trainer;
  }

  /** `speclab gateway` for this run: a free port the first time, the same port and token file after. */
  async gateway(): Promise<CliProcess> {
    if (!this.tokenFile) {
      this.tokenFile = join(root, `${this.name}.token`);
      writeFileSync(this.tokenFile, `${newGatewayToken()}\n`);
    }
    const port = this.gatewayUrl === '' ? '0' : new URL(this.gatewayUrl).port;
    const p = cli(['gateway', ...this.cluster, '--token-file', this.tokenFile, '--port', port, '--wait-ms', '90000']);
    this.gatewayProcess = p;
    await p.waitFor(/to add a tab as a rollout worker/);
    const url = /at (ws:\/\/\S+)/.exec(p.output())![1];
    if (this.gatewayUrl !== '' && url !== this.gatewayUrl) throw new Error(`the restarted gateway serves ${url}, not ${this.gatewayUrl}`);
    this.gatewayUrl = url;
    return p;
  }

  /** A tab client joining through the gateway (started first), registered as a worker expected to finish. */
  tab(id: string, batch = 2): CliProcess {
    const p = tabClient([
      '--gateway',
      this.gatewayUrl,
      '--token-file',
      this.tokenFile!,
      '--run',
      this.name,
      '--target',
      target,
      '--batch',
      String(batch),
      '--poll-ms',
      '10',
      '--worker-id',
      id,
      '--wait-ms',
      '90000',
    ]);
    this.rollouts.set(id, p);
    this.tabs.push(p);
    return p;
  }

  /** The samples the tab clients said they committed, all of them together. */
  tabCommitted(): number {
    return this.tabs.reduce((n, p) => n + [...p.output().matchAll(/: committed (\d+) \(total/g)].reduce((m, x) => m + Number(x[1]), 0), 0);
  }

  async trainerExit(): Promise<ProcessExit> {
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

export function report(name: string, problems: string[], seconds: number): void {
  if (problems.length === 0) passed++;
  else failed++;
  console.log(
    `${problems.length === 0 ? 'ok  ' : 'not ok'} ${name} (${seconds.toFixed(1)} s)${problems.length === 0 ? '' : `\n    ${problems.join('\n    ')}`}`,
  );
}

export function tally(): { passed: number; failed: number; worstRel: number } {
  return { passed, failed, worstRel };
}

/** The assertions every case ends with, on a run whose trainer has ended for the last time. */
export async function verify(run: Run, reference: StepRecord[], problems: string[]): Promise<void> {
  const last = run.trainerExits.at(-1);
  if (last?.code !== 0)
    problems.push(`the trainer's final exit is ${last?.code ?? 'none'} (${last?.signal ?? ''}):\n${last?.output.slice(-2000)}`);
  // The workers still running exit 0 once the run is finished.
  for (const [id, p] of run.rollouts) {
    const e = await exitWithin(p, `rollout ${id}`, 30_000, 'the trainer ended').catch((err: Error) => ({
      code: -1,
      signal: null,
      output: err.message,
    }));
    if (e.code !== 0)
      problems.push(`rollout ${id} exited ${e.code} (${e.signal}), want 0 once the run is finished:\n${e.output.slice(-1500)}`);
  }
  // `speclab status`, the command a person runs.
  const st = cli(['status', ...run.cluster, '--format', 'json']);
  const se = await st.exited;
  try {
    const s = JSON.parse(se.output.trim().split('\n').at(-1) ?? '') as Record<string, number>;
    const want = {
      samplesCommitted: TOTAL_SAMPLES,
      durableAcked: TOTAL_SAMPLES,
      trainBacklog: 0,
      promptsFailed: 0,
      durableGlobalStep: TOTAL_STEPS,
    };
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
  for (const r of records.filter((x) => x.replay))
    if (r.step <= minResume) problems.push(`step ${r.step} trained again although durable (resumes from ${resumedFrom.join(', ')})`);
  for (const r of records) {
    const ref = reference.find((x) => x.step === r.step);
    if (!ref) continue;
    const rel = Math.abs(r.loss - ref.loss) / Math.max(Math.abs(ref.loss), 1e-12);
    worstRel = Math.max(worstRel, rel);
    if (rel > 1e-6)
      problems.push(
        `step ${r.step}${r.replay ? ' (replay)' : ''}: loss ${r.loss} vs reference ${ref.loss} (relative ${rel.toExponential(2)})`,
      );
  }
}

/** Run only the cases whose name contains this (after the uninterrupted reference run). */
const ONLY = process.argv[2];

/** One case on a fresh run id (on `server`, or a Redis of its own): its body, then `verify`. */
export async function runCase(
  name: string,
  server: RedisServer | undefined,
  reference: StepRecord[],
  body: (run: Run) => Promise<void>,
): Promise<void> {
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
    for (const p of [run.trainer, ...run.rollouts.values(), run.gatewayProcess]) p?.kill();
  }
  report(name, problems, (performance.now() - t0) / 1000);
}

/** SIGKILLs `p` and waits for it to be gone; an error when it had already exited (the kill point was missed). */
export async function killAt(p: CliProcess, what: string): Promise<ProcessExit> {
  p.kill();
  const e = await p.exited;
  if (e.signal !== 'SIGKILL')
    throw new Error(`${what}: the process had already ended (exit ${e.code}) before the kill point:\n${e.output.slice(-1500)}`);
  return e;
}
