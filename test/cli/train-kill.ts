/**
 * SIGKILL of a real `speclab train` at the step-durable boundary. Each step's metrics line is written
 * and fsynced before the step's ack; a resume marks the steps it trains again with `replay: true`.
 * So whatever the moment of the kill, the resumed run's metrics.jsonl holds every step exactly once
 * unmarked, a replay only for a step the killed process logged but never made durable, and the
 * losses of an uninterrupted run.
 *
 * Kill points, with checkpoints (durable acks) every 2 steps:
 *   - the line of a durable step (4) appears: the kill lands inside that step's ack;
 *   - the journal grows after that line: the ack of step 4 is durable, nothing is replayed;
 *   - the line of a non-durable step (5) appears: step 5 is trained again and marked a replay.
 * After each resume, the run's own export and `speclab export --checkpoint RUN_DIR` are byte-identical
 * to the uninterrupted run's export.
 * Node-only; run by scripts/test-all.sh.  `tsx test/cli/train-kill.ts`
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const target = resolve(repo, process.env.SPECLAB_FIXTURES ?? '../shared/fixtures', 'hf/llama-tiny');
const root = mkdtempSync(join(tmpdir(), 'speclab-train-kill-'));
const TOTAL_STEPS = 12;
const FLAGS = [
  '--target',
  target,
  '--train-prompts',
  '8',
  '--eval-prompts',
  '1',
  '--response-length',
  '16',
  '--epochs',
  '3',
  '--round-prompts',
  '8',
  '--batch-size',
  '2',
  '--max-new-tokens',
  '8',
  '--eval-train-prompts',
  '0',
  '--checkpoint-every',
  '2',
  '--log-every',
  '1',
];

let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail = ''): void {
  if (ok) passed++;
  else failed++;
  console.log(`[node] ${ok ? 'ok  ' : 'FAIL'} cli/train-kill › ${name}${ok || !detail ? '' : `: ${detail}`}`);
}

interface StepRecord {
  step: number;
  loss: number;
  checkpointed: boolean;
  replay?: boolean;
}

function trainRecords(out: string): StepRecord[] {
  if (!existsSync(join(out, 'metrics.jsonl'))) return [];
  return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"phase":"train"'))
    .map((l) => JSON.parse(l) as StepRecord);
}

function train(out: string, extra: string[] = []): { code: number | null; output: string } {
  const r = spawnSync(process.execPath, ['bin/speclab.mjs', 'train', ...FLAGS, '--out', out, ...extra], {
    cwd: repo,
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { code: r.status, output: `${r.stdout}${r.stderr}` };
}

type KillPoint = { kind: 'line'; step: number } | { kind: 'ack'; step: number };

/** Starts a run and SIGKILLs it at `point`, watching the run folder as the trainer writes. */
async function trainAndKill(out: string, point: KillPoint): Promise<{ signal: NodeJS.Signals | null; output: string }> {
  const child = spawn(process.execPath, ['bin/speclab.mjs', 'train', ...FLAGS, '--out', out], {
    cwd: repo,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
  const journal = join(out, 'metadata', 'journal-00000000.log');
  let journalAtLine = -1;
  const poll = (): boolean => {
    const logged = trainRecords(out).some((r) => r.step === point.step);
    if (!logged) return false;
    if (point.kind === 'line') return true;
    const size = existsSync(journal) ? statSync(journal).size : 0;
    if (journalAtLine < 0) journalAtLine = size;
    return size > journalAtLine;
  };
  // Polled every 2 ms: a step takes ~100 ms here, and its ack follows its line by a few ms.
  const deadline = Date.now() + 120_000;
  while (child.exitCode === null && child.signalCode === null && Date.now() < deadline) {
    if (poll()) {
      child.kill('SIGKILL');
      break;
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  return { signal: await exited, output };
}

try {
  const whole = join(root, 'whole');
  const uninterrupted = train(whole);
  const reference = trainRecords(whole);
  check(
    'an uninterrupted run trains every step',
    uninterrupted.code === 0 && reference.length === TOTAL_STEPS,
    `exit ${uninterrupted.code}, ${reference.length} steps\n${uninterrupted.output.slice(-1500)}`,
  );

  const points: [string, KillPoint][] = [
    ['at the line of durable step 4', { kind: 'line', step: 4 }],
    ['right after the ack of step 4', { kind: 'ack', step: 4 }],
    ['at the line of non-durable step 5', { kind: 'line', step: 5 }],
  ];
  for (const [name, point] of points) {
    const out = join(root, `kill-${point.kind}-${point.step}`);
    const killed = await trainAndKill(out, point);
    const before = trainRecords(out);
    check(
      `${name}: the trainer died by SIGKILL mid-run`,
      killed.signal === 'SIGKILL' && before.length < TOTAL_STEPS,
      `signal ${killed.signal}, ${before.length} steps logged\n${killed.output.slice(-1500)}`,
    );
    const resumed = train(out, ['--resume']);
    const durable = Number(/resuming after step (\d+)/.exec(resumed.output)?.[1] ?? 0);
    check(`${name}: the resume exits 0`, resumed.code === 0, resumed.output.slice(-1500));
    const records = trainRecords(out);
    const plain = records.filter((r) => !r.replay);
    const replays = records.filter((r) => r.replay);
    const steps = plain.map((r) => r.step).join(',');
    check(
      `${name}: every step once, unmarked (durable at the kill: step ${durable}, logged: ${before.length})`,
      steps === reference.map((r) => r.step).join(','),
      `unmarked steps ${steps}`,
    );
    const expectReplayed = before
      .filter((r) => r.step > durable)
      .map((r) => r.step)
      .join(',');
    check(
      `${name}: replays are exactly the logged steps past the durable one [${expectReplayed}]`,
      replays.map((r) => r.step).join(',') === expectReplayed,
      `replay records for steps ${replays.map((r) => r.step).join(',')}`,
    );
    if (point.kind === 'ack')
      check(
        `${name}: the step is durable and not replayed`,
        durable >= point.step && !replays.some((r) => r.step === point.step),
        `durable ${durable}`,
      );
    if (point.kind === 'line' && point.step === 5)
      check(`${name}: the step is replayed, marked`, durable === 4 && replays.some((r) => r.step === 5), `durable ${durable}`);
    const draftFiles = ['config.json', 'model.safetensors'];
    const sameExport = draftFiles.every(
      (f) => Buffer.compare(readFileSync(join(out, 'draft', f)), readFileSync(join(whole, 'draft', f))) === 0,
    );
    check(`${name}: the resumed run's export is byte-identical to the uninterrupted run's`, sameExport, 'draft/ differs');
    const exported = join(out, 'exported');
    const ex = spawnSync(process.execPath, ['bin/speclab.mjs', 'export', '--checkpoint', out, '--out', exported], {
      cwd: repo,
      encoding: 'utf8',
      timeout: 120_000,
    });
    const sameAsExport =
      ex.status === 0 &&
      draftFiles.every((f) => Buffer.compare(readFileSync(join(exported, f)), readFileSync(join(whole, 'draft', f))) === 0);
    check(`${name}: speclab export --checkpoint RUN_DIR gives the same bytes`, sameAsExport, `exit ${ex.status}\n${ex.stdout}${ex.stderr}`);
    const lossesEqual =
      plain.every((r, i) => r.loss === reference[i]?.loss) && replays.every((r) => r.loss === plain.find((p) => p.step === r.step)?.loss);
    check(
      `${name}: losses equal the uninterrupted run's, replays included`,
      lossesEqual,
      plain.map((r, i) => `${r.step}: ${r.loss} vs ${reference[i]?.loss}`).join('; '),
    );
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
