/**
 * `bin/speclab.mjs` runs the command in its own process, so a signal sent to the pid a user sees
 * ends the command. The launcher used to spawn the command as a child and forward nothing: `kill
 * <pid>` killed the launcher and left the trainer running, writing into its run folder.
 * Node-only; run by scripts/test-all.sh.  `tsx test/cli/launcher-signal.ts`
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'speclab-launcher-'));
let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail = ''): void {
  if (ok) passed++;
  else failed++;
  console.log(`[node] ${ok ? 'ok  ' : 'FAIL'} cli/launcher › ${name}${ok || !detail ? '' : `: ${detail}`}`);
}

/** Pids of live processes whose command line mentions `marker`. */
function processesMentioning(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

try {
  const child = spawn(process.execPath, ['bin/speclab.mjs', 'train', '--out', out, '--fresh', '--aux-layers', '0,1,1'], {
    cwd: repo,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  // Wait until the command is really working (it has printed), then signal only the pid we started.
  for (let waited = 0; output.length === 0 && waited < 60_000; waited += 100) await new Promise((r) => setTimeout(r, 100));
  check('the command started and printed', output.length > 0, 'no output within 60 s');
  child.kill('SIGTERM');
  const how = await exited;
  await new Promise((r) => setTimeout(r, 500));
  const left = processesMentioning(out);
  check(
    `SIGTERM to the launcher's pid ends the command (exit: ${String(how)})`,
    left.length === 0,
    `still running: pids ${left.join(', ')}`,
  );
  for (const pid of left) process.kill(pid, 'SIGKILL');
} finally {
  rmSync(out, { recursive: true, force: true });
}
console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
