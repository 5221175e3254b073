/**
 * Multi-process proof of the Redis backend (Node only):  npx tsx test/dataplane/multiprocess.ts
 *
 * Two producer processes put 5,000 samples each (small i32 + f32 jagged tensors, seq_len tags, with
 * bytes-outstanding back-pressure); a "victim" consumer claims a leased batch and is SIGKILLed
 * before acking; then two consumer processes of the same task claim, verify every byte, ack and
 * clear until all 10,000 samples are acknowledged. Part-way through, one running consumer is
 * SIGKILLed wherever it happens to be (often holding a leased batch) and a replacement started.
 * Consumers ack with `clear`, so consuming and freeing a row is one atomic step, and the run ends
 * when the store says so (every sample put and none left), not when every ack has been reported: a
 * consumer killed right after an ack takes its report with it, never the rows.
 * Checks: every sample consumed exactly once, none lost, the killed consumers' rows came back
 * after lease expiry, the store ends empty.
 * Prints one line per check and `N passed, N failed`; exit code 1 on any failure.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import process from 'node:process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { connectRedis } from '../../src/platform/redis-node.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { startRedisServer } from './redis-fixture.ts';

const PRODUCERS = 2;
const PER_PRODUCER = 5000;
const TOTAL = PRODUCERS * PER_PRODUCER;
const PUT_BATCH = 50;
const MAX_BYTES_OUTSTANDING = 64 * 1024;
const DEADLINE_MS = 300_000;
/** Acked count at which the running consumer c1 is killed and replaced by c2. */
const KILL_AT = 4000;

const workerPath = fileURLToPath(new URL('./mp-worker.ts', import.meta.url));
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail = ''): void {
  if (ok) passed++;
  else failed++;
  console.log(`[node] ${ok ? 'ok  ' : 'FAIL'} dataplane/multiprocess › ${name}${detail ? ` (${detail})` : ''}`);
}

type Report = Record<string, unknown> & { kind: string };

interface Worker {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr: string;
}

function startWorker(name: string, args: string[], onReport: (r: Report, w: Worker) => void): Worker {
  const child = spawn(process.execPath, ['--import', 'tsx', workerPath, ...args], { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const worker: Worker = { name, child, exited, stderr: '' };
  child.stderr!.on('data', (chunk: Buffer) => (worker.stderr += chunk.toString()));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let record: Report;
    try {
      record = JSON.parse(line) as Report;
    } catch {
      console.log(`[${name}] ${line}`);
      return;
    }
    onReport(record, worker);
  });
  return worker;
}

const server = await startRedisServer();
const workers: Worker[] = [];
const timer = setTimeout(() => {
  console.log(`[node] deadline of ${DEADLINE_MS} ms passed; killing workers`);
  for (const w of workers) w.child.kill('SIGKILL');
}, DEADLINE_MS);

try {
  const admin = await createDataPlaneClient(
    { impl: 'transferQueue', backend: { kind: 'redis', url: server.url, keyPrefix: 'mp' }, claimPollMs: 10 },
    { connectRedis },
  );
  await admin.registerPartition({ partition: 'mp', fields: { input_ids: 'i32', hidden: 'f32' }, consumerTasks: ['train'] });

  const produced: Report[] = [];
  const errors: string[] = [];
  const ackedBy = new Map<string, string[]>(); // sample id → consumers that acked it
  const bad: string[] = [];
  const lost: string[] = [];
  let victimClaim: string[] = [];
  let consumers: Worker[] = [];
  let killedMidRun = false;
  const ready = new Set<string>();
  const started = performance.now();

  const onReport = (r: Report, w: Worker): void => {
    if (r.kind === 'error') errors.push(`${w.name}: ${String(r.message)}`);
    else if (r.kind === 'ready') {
      ready.add(w.name);
      // The replacement starts at once; the first two only when both are connected.
      if (w.name === 'consumer2') w.child.stdin!.write('go\n');
      else if (ready.has('consumer0') && ready.has('consumer1')) for (const c of consumers.slice(0, 2)) c.child.stdin!.write('go\n');
    } else if (r.kind === 'produced') produced.push(r);
    else if (r.kind === 'lost') lost.push(...(r.ids as string[]));
    else if (r.kind === 'acked') {
      for (const id of r.ids as string[]) ackedBy.set(id, [...(ackedBy.get(id) ?? []), String(r.consumer)]);
      bad.push(...(r.bad as string[]));
      if (ackedBy.size >= KILL_AT && !killedMidRun) {
        killedMidRun = true;
        consumers[1].child.kill('SIGKILL');
        const replacement = startWorker('consumer2', ['consumer', server.url, 'c2'], onReport);
        consumers.push(replacement);
        workers.push(replacement);
      }
    }
  };
  const stopConsumers = (): void => {
    for (const c of consumers) if (c.child.exitCode === null && c.child.signalCode === null) c.child.stdin!.write('stop\n');
  };
  // Completion comes from the store: every sample was put, and every one was consumed and cleared.
  let storeDrained = false;
  const watchStore = (async () => {
    while (!storeDrained && performance.now() - started < DEADLINE_MS) {
      await new Promise((r) => setTimeout(r, 200));
      if (produced.length < PRODUCERS) continue;
      if ((await admin.partitionStats('mp')).samples === 0) storeDrained = true;
    }
    stopConsumers();
  })();

  for (let p = 0; p < PRODUCERS; p++) {
    workers.push(
      startWorker(
        `producer${p}`,
        ['producer', server.url, String(p), String(PER_PRODUCER), String(PUT_BATCH), String(MAX_BYTES_OUTSTANDING)],
        onReport,
      ),
    );
  }

  // The victim claims a leased batch, reports it, and is killed before it can ack.
  const victimClaimed = new Promise<string[]>((resolve) => {
    const victim = startWorker('victim', ['victim', server.url], (r, w) => {
      if (r.kind === 'claimed') {
        w.child.kill('SIGKILL');
        resolve(r.ids as string[]);
      } else onReport(r, w);
    });
    workers.push(victim);
  });
  victimClaim = await victimClaimed;
  const victim = workers.find((w) => w.name === 'victim')!;
  const victimExit = await victim.exited;
  check(
    'victim consumer claimed a leased batch and was SIGKILLed before acking',
    victimClaim.length === 16 && victimExit.signal === 'SIGKILL',
    `${victimClaim.length} rows, signal ${victimExit.signal}`,
  );

  consumers = [0, 1].map((c) => startWorker(`consumer${c}`, ['consumer', server.url, `c${c}`], onReport));
  workers.push(...consumers);

  // Wait for every worker, including a replacement started while waiting.
  let exits: { w: Worker; code: number | null; signal: NodeJS.Signals | null }[] = [];
  for (let seen = 0; seen !== workers.length;) {
    seen = workers.length;
    exits = await Promise.all(workers.map(async (w) => ({ w, ...(await w.exited) })));
  }
  storeDrained = true;
  await watchStore;
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  for (const { w, code, signal } of exits) {
    if (w.name === 'victim') continue;
    if (w.name === 'consumer1') {
      check('consumer1 was SIGKILLed mid-run', signal === 'SIGKILL', `code ${code}, signal ${signal}`);
      continue;
    }
    check(`${w.name} exited cleanly`, code === 0, code === 0 ? '' : `code ${code}, signal ${signal}, stderr: ${w.stderr.slice(-400)}`);
  }
  check('no worker reported an error', errors.length === 0, errors.join(' | ').slice(0, 800));
  check(
    'both producers put all their samples',
    produced.length === PRODUCERS && produced.every((r) => r.count === PER_PRODUCER),
    JSON.stringify(produced),
  );
  const peak = Math.max(...produced.map((r) => Number(r.peakBytesOutstanding)));
  const waits = produced.reduce((a, r) => a + Number(r.backpressureWaits), 0);
  check(
    'producers respected the bytes-outstanding back-pressure limit (one put batch of slack)',
    peak <= MAX_BYTES_OUTSTANDING + PUT_BATCH * 9 * 12,
    `peak ${peak} B, limit ${MAX_BYTES_OUTSTANDING} B, ${waits} waits`,
  );

  const expected = new Set<string>();
  for (let p = 0; p < PRODUCERS; p++) for (let i = 0; i < PER_PRODUCER; i++) expected.add(`p${p}_s${i}`);
  const duplicated = [...ackedBy].filter(([, by]) => by.length > 1);
  const missing = [...expected].filter((id) => !ackedBy.has(id));
  const unexpected = [...ackedBy.keys()].filter((id) => !expected.has(id));
  // Rows leave the store only through an ack-with-clear, so an empty store after every put means
  // every sample was consumed. Unreported ones can only be the last batch of the consumer killed
  // mid-run (at most one claim of 64), acked in the store just before its report died with it.
  const stats = await admin.partitionStats('mp');
  check(
    `all ${TOTAL} samples were consumed (none lost): the store is empty after every put`,
    stats.samples === 0 && unexpected.length === 0,
    `${stats.samples} left, ${unexpected.length} unexpected`,
  );
  check(
    "samples consumed but never reported are at most the killed consumer's last batch",
    missing.length <= 64,
    `${ackedBy.size} reported, ${missing.length} unreported e.g. ${missing.slice(0, 3).join(',')}`,
  );
  check(
    'every sample was consumed exactly once',
    duplicated.length === 0,
    `${duplicated.length} acked twice, e.g. ${JSON.stringify(duplicated.slice(0, 2))}`,
  );
  const split = [0, 1, 2].map((c) => [...ackedBy.values()].filter((by) => by[0] === `c${c}`).length);
  // The replacement may find the task already drained by the survivor when the machine is loaded
  // (its process starts in seconds); its clean exit is checked above, its share is only reported.
  check(
    'both original consumers of the one task took part (c1 before its kill)',
    split[0] > 0 && split[1] > 0,
    `c0 ${split[0]}, c1 ${split[1]}, c2 (replacement) ${split[2]}`,
  );
  check(
    "the killed consumer's rows came back after lease expiry and were consumed",
    victimClaim.every((id) => ackedBy.get(id)?.length === 1),
    `${victimClaim.filter((id) => ackedBy.has(id)).length}/${victimClaim.length}`,
  );
  check('every payload byte and seq_len tag verified by the consumers', bad.length === 0, bad.slice(0, 3).join('; '));
  check('no lease expired under a live consumer', lost.length === 0, `${lost.length} lost`);

  check(
    'the store ends empty: consumers cleared every row and its bytes',
    stats.samples === 0 && stats.bytesHeld === 0,
    `${stats.samples} samples, ${stats.bytesHeld} bytes`,
  );
  console.log(
    `[node] ${TOTAL} samples through ${PRODUCERS} producers and 2 consumers (one victim and one running consumer killed, one replacement) in ${seconds} s`,
  );
  await admin.close();
} catch (err) {
  check('orchestration', false, err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  clearTimeout(timer);
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  await server.stop();
}

console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
