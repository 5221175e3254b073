/**
 * Crash tests with real processes (Node only): `npx tsx test/runtime/crash.ts [filter]`.
 *
 * Each scenario runs test/runtime/crash-child.ts (rollout worker + trainer against a FileMetadataStore
 * and a spilling LocalFeatureStore in a fresh temp dir), kills it with SIGKILL at the point the child
 * announces, then runs a second child on the same dir that reopens the journal, reconciles and trains
 * to completion. The GPU memory of the first child is gone with it; only the journal, the spill files,
 * the checkpoints and events.jsonl (what each life trained and acked) survive.
 *
 * Checked for every scenario: the killed child died by SIGKILL at the announced point; the restart
 * reopens the journal cleanly and exits 0; every committed sample ends durably acked, confirmed at
 * most once; nothing acked before the crash is trained again; everything requeued is trained and
 * acked by the restart; released and requeued are disjoint; the restart restores the checkpoint of
 * the durable ack step; no spill file, resident sample or GPU buffer is left at the end.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { onlineSampleId } from '../../src/contracts/ids.ts';
import type { ReconcileReport } from '../../src/control/controller.ts';
import { FileMetadataStore, type RecoveryReport } from '../../src/control/file-metadata-store.ts';
import { spillPath } from '../../src/data/feature-spill.ts';
import { nodePlatform } from '../../src/platform/node.ts';
import { assert, assertDeepEqual, assertEqual } from '../harness/assert.ts';
import { BATCH, KILL_STEP, PROMPTS, RUN_ID, taskId, type ChildEvent, type KillAt } from './crash-protocol.ts';

const CHILD = fileURLToPath(new URL('./crash-child.ts', import.meta.url));
const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CHILD_TIMEOUT_MS = 60_000;
const ALL_IDS = Array.from({ length: PROMPTS }, (_, i) => onlineSampleId(RUN_ID, taskId(i)));

interface Announcement {
  event: 'started' | 'point' | 'done';
  pid: number;
  [key: string]: unknown;
}

interface Started extends Announcement {
  recovery: RecoveryReport;
  reconcile: ReconcileReport;
  restoredStep: number;
}

interface Done extends Announcement {
  status: { samplesCommitted: number; durableAcked: number; trainBacklog: number; queueDepth: number; queueInFlight: number };
  health: { residentSamples: number; spill: { reads: number; failedDeletes: number } };
  spilled: string[];
  liveBuffers: number;
  globalStep: number;
}

interface ChildRun {
  pid: number;
  announcements: Announcement[];
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/** Runs one child life; a `point` announcement is answered with SIGKILL at once. */
function runChild(dir: string, killAt: KillAt): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, dir, killAt], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    const announcements: Announcement[] = [];
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`child ${killAt} in ${dir} did not finish within ${CHILD_TIMEOUT_MS} ms; stderr:\n${stderr.slice(-2000)}`));
    }, CHILD_TIMEOUT_MS);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      stdout += chunk;
      let nl: number;
      while ((nl = stdout.indexOf('\n')) >= 0) {
        const line = stdout.slice(0, nl);
        stdout = stdout.slice(nl + 1);
        if (!line.startsWith('@@ ')) continue;
        const a = JSON.parse(line.slice(3)) as Announcement;
        announcements.push(a);
        if (a.event === 'point') child.kill('SIGKILL');
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => (stderr += chunk));
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ pid: child.pid ?? -1, announcements, code, signal, stderr });
    });
  });
}

function only<T extends Announcement>(run: ChildRun, event: Announcement['event']): T {
  const found = run.announcements.filter((a) => a.event === event);
  assertEqual(
    found.length,
    1,
    `child ${run.pid}: "${event}" announcements (exit ${run.code ?? run.signal}; stderr tail: ${run.stderr.slice(-600)})`,
  );
  return found[0] as T;
}

function readEvents(dir: string): ChildEvent[] {
  const path = join(dir, 'events.jsonl');
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as ChildEvent);
}

const idsOf = (events: ChildEvent[], pid: number, kind: ChildEvent['kind']): string[] =>
  events.filter((e) => e.pid === pid && e.kind === kind).flatMap((e) => e.ids);
const sorted = (ids: Iterable<string>): string[] => [...ids].sort();

/** What holds after the final life, whatever happened before it. */
async function checkFinal(dir: string, events: ChildEvent[], lives: ChildRun[], done: Done): Promise<void> {
  const reopened = await FileMetadataStore.open(nodePlatform.files(dir), { dir: 'metadata' });
  try {
    assertEqual(reopened.recovery.tornBytesDropped, 0, 'final journal ends cleanly');
    assertDeepEqual(await reopened.allCommittedIds().then(sorted), sorted(ALL_IDS), 'every prompt committed exactly once');
    const marker = await reopened.durableMarker();
    assertDeepEqual(sorted(marker.acked), sorted(ALL_IDS), 'every committed sample durably acked');
    assertEqual(marker.optimizerDurable, true, 'marker optimizer-durable');
    assertEqual(marker.globalStep, done.globalStep, 'marker step = the last step trained');
  } finally {
    await reopened.close();
  }
  const confirmed = new Map<string, number>();
  for (const life of lives) for (const id of idsOf(events, life.pid, 'acked')) confirmed.set(id, (confirmed.get(id) ?? 0) + 1);
  for (const [id, n] of confirmed) assert(n === 1, `sample ${id} acked ${n} times`);
  const trained = new Set(lives.flatMap((life) => idsOf(events, life.pid, 'trained')));
  assertDeepEqual(sorted(trained), sorted(ALL_IDS), 'every sample trained at least once');
  assertDeepEqual(
    [done.status.samplesCommitted, done.status.durableAcked, done.status.trainBacklog, done.status.queueDepth, done.status.queueInFlight],
    [PROMPTS, PROMPTS, 0, 0, 0],
    'restart status: committed / acked / backlog / depth / in flight',
  );
  assertDeepEqual(done.spilled, [], 'no spill file left (acked samples are aborted)');
  assertEqual(existsSync(join(dir, 'spill')) ? readdirSync(join(dir, 'spill')).length : 0, 0, 'spill folder empty on disk');
  assertEqual(done.health.residentSamples, 0, 'nothing resident at the end');
  assertEqual(done.health.spill.failedDeletes, 0, 'no failed spill delete');
  assertEqual(done.liveBuffers, 0, 'no GPU buffer leaked');
}

interface Scenario {
  name: string;
  killAt: KillAt;
  /** Checks specific to this kill point, after the restart completed. */
  check(ctx: {
    dir: string;
    crashed: ChildRun;
    point: Announcement;
    started: Started;
    events: ChildEvent[];
    restartPid: number;
    done: Done;
    spillsAtKill: boolean[];
  }): void;
}

/** The window of step KILL_STEP: the ids the crashed child trained at that step. */
function killWindow(events: ChildEvent[], pid: number): string[] {
  return events.filter((e) => e.pid === pid && e.kind === 'trained' && e.step === KILL_STEP).flatMap((e) => e.ids);
}

function commonCrashChecks(ctx: Parameters<Scenario['check']>[0]): void {
  const { crashed, started, events, restartPid } = ctx;
  const ackedBefore = new Set(idsOf(events, crashed.pid, 'acked'));
  const trainedAfter = new Set(idsOf(events, restartPid, 'trained'));
  const released = new Set(started.reconcile.released);
  const requeued = started.reconcile.requeued;
  assertDeepEqual(
    [...ackedBefore].filter((id) => trainedAfter.has(id)),
    [],
    'samples acked before the crash trained again',
  );
  assertDeepEqual(
    requeued.filter((id) => released.has(id)),
    [],
    'released ∩ requeued',
  );
  assertDeepEqual(
    [...ackedBefore].filter((id) => !released.has(id)),
    [],
    'acked before the crash but not released',
  );
  const ackedAfter = new Set(idsOf(events, restartPid, 'acked'));
  assertDeepEqual(
    requeued.filter((id) => !ackedAfter.has(id) || !trainedAfter.has(id)),
    [],
    'requeued but not trained and acked by the restart',
  );
  // At-least-once: trained before the crash without a durable ack → trained again.
  const notDurable = idsOf(events, crashed.pid, 'trained').filter((id) => !released.has(id));
  assertDeepEqual(
    notDurable.filter((id) => !trainedAfter.has(id)),
    [],
    'trained before the crash, not durably acked, not retrained',
  );
  assertEqual(started.recovery.snapshotGeneration === null || started.recovery.snapshotGeneration >= 0, true, 'journal reopened');
}

const SCENARIOS: Scenario[] = [
  {
    name: 'no crash: one life trains and acks every sample exactly once',
    killAt: 'none',
    check({ events, restartPid }) {
      const trained = idsOf(events, restartPid, 'trained');
      assertDeepEqual(sorted(trained), sorted(ALL_IDS), 'each sample trained exactly once');
    },
  },
  {
    name: '(a) killed after put, before commitSamples: spilled but uncommitted samples are dropped and re-produced',
    killAt: 'after-put',
    check(ctx) {
      commonCrashChecks(ctx);
      const uncommitted = ctx.point.uncommitted as string[];
      assertEqual(uncommitted.length, 4, 'the round being committed');
      assert(ctx.spillsAtKill.every(Boolean), 'every put of the round was on disk before commitSamples was called');
      assertDeepEqual(
        sorted(ctx.started.reconcile.droppedUncommitted),
        sorted(uncommitted),
        'reconcile dropped exactly the uncommitted spills',
      );
      assertDeepEqual(
        ctx.started.reconcile.requeued.filter((id) => uncommitted.includes(id)),
        [],
        'uncommitted samples are not requeued',
      );
      assertEqual(ctx.started.recovery.tornBytesDropped, 0, 'no torn tail');
    },
  },
  {
    name: `(b) killed after optimizer step ${KILL_STEP}, before its ack: the window is requeued and re-read from the spill`,
    killAt: 'after-step',
    check(ctx) {
      commonCrashChecks(ctx);
      const window = ctx.point.ids as string[];
      assertEqual(window.length, BATCH, 'window size');
      assertDeepEqual(
        window.filter((id) => !ctx.started.reconcile.requeued.includes(id)),
        [],
        'unacked window requeued',
      );
      assertEqual(ctx.started.restoredStep, KILL_STEP - 1, 'restart restores the checkpoint of the durable ack step, not the later one');
      assert(
        ctx.done.health.spill.reads >= window.length,
        `requeued samples re-materialised from the spill (reads ${ctx.done.health.spill.reads})`,
      );
      assertEqual(ctx.started.recovery.tornBytesDropped, 0, 'no torn tail');
    },
  },
  {
    name: `(c) killed mid ack record of step ${KILL_STEP} (half a frame written): torn tail dropped on reopen, window retrained`,
    killAt: 'ack-torn',
    check(ctx) {
      commonCrashChecks(ctx);
      const window = killWindow(ctx.events, ctx.crashed.pid);
      assert(ctx.started.recovery.tornBytesDropped > 0, `reopen dropped the torn tail (${ctx.started.recovery.tornBytesDropped} bytes)`);
      assertEqual(ctx.started.recovery.tornBytesDropped, ctx.point.written as number, 'exactly the half frame was dropped');
      assertDeepEqual(
        window.filter((id) => !ctx.started.reconcile.requeued.includes(id)),
        [],
        'the window whose ack was torn is requeued',
      );
      assertEqual(ctx.started.reconcile.globalStep, KILL_STEP - 1, 'marker step before the torn ack');
      assertEqual(ctx.started.restoredStep, KILL_STEP - 1, 'restored checkpoint step');
    },
  },
  {
    name: `(c') killed after the ack frame of step ${KILL_STEP} was appended but before its fsync returned: the ack counts, nothing retrained`,
    killAt: 'ack-unsynced',
    check(ctx) {
      commonCrashChecks(ctx);
      const window = killWindow(ctx.events, ctx.crashed.pid);
      assertEqual(window.length, BATCH, 'window size');
      assertDeepEqual(
        window.filter((id) => !ctx.started.reconcile.released.includes(id)),
        [],
        'the landed ack releases its window',
      );
      assertEqual(ctx.started.reconcile.globalStep, KILL_STEP, 'marker step of the landed ack');
      assertEqual(ctx.started.restoredStep, KILL_STEP, 'restored checkpoint step');
      const trainedAfter = new Set(idsOf(ctx.events, ctx.restartPid, 'trained'));
      assertDeepEqual(
        window.filter((id) => trainedAfter.has(id)),
        [],
        'window of the landed ack trained again',
      );
      assertEqual(ctx.started.recovery.tornBytesDropped, 0, 'the whole frame reached the file');
    },
  },
];

const filter = process.argv[2];
let passed = 0;
let failed = 0;
for (const scenario of SCENARIOS) {
  const name = `runtime/crash › ${scenario.name}`;
  if (filter && !name.includes(filter)) continue;
  const dir = mkdtempSync(join(tmpdir(), 'speclab-crash-'));
  const start = performance.now();
  try {
    const lives: ChildRun[] = [];
    let crashed: ChildRun | undefined;
    let point: Announcement | undefined;
    let spillsAtKill: boolean[] = [];
    if (scenario.killAt !== 'none') {
      crashed = await runChild(dir, scenario.killAt);
      lives.push(crashed);
      point = only(crashed, 'point');
      assertEqual(point.point, scenario.killAt, 'kill point reached');
      assertEqual(
        crashed.signal,
        'SIGKILL',
        `crashed child ended by SIGKILL (exit ${crashed.code}; stderr: ${crashed.stderr.slice(-600)})`,
      );
      spillsAtKill = ((point.uncommitted as string[] | undefined) ?? []).map((id) => existsSync(join(dir, 'spill', spillPath(id))));
    }
    const restart = await runChild(dir, 'none');
    lives.push(restart);
    assertEqual(restart.code, 0, `restart exit code (stderr tail: ${restart.stderr.slice(-1200)})`);
    const started = only<Started>(restart, 'started');
    const done = only<Done>(restart, 'done');
    const events = readEvents(dir);
    scenario.check({
      dir,
      crashed: crashed ?? restart,
      point: point ?? restart.announcements[0],
      started,
      events,
      restartPid: restart.pid,
      done,
      spillsAtKill,
    });
    await checkFinal(dir, events, lives, done);
    passed++;
    console.log(
      `[node] ok   ${name} (${(performance.now() - start).toFixed(0)} ms) ${JSON.stringify({ requeued: started.reconcile.requeued.length, released: started.reconcile.released.length, torn: started.recovery.tornBytesDropped, spillReads: done.health.spill.reads })}`,
    );
    rmSync(dir, { recursive: true, force: true });
  } catch (err) {
    failed++;
    console.log(
      `[node] FAIL ${name} (${(performance.now() - start).toFixed(0)} ms): ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)} (files kept in ${dir})`,
    );
  }
}
console.log(`[node] ${passed} passed, ${failed} failed`);
process.exitCode = failed > 0 || passed === 0 ? 1 : 0;
