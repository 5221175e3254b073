/**
 * A full disk under `speclab train`: the run folder is a small tmpfs, so a write fails with ENOSPC
 * wherever the run happens to be (a rollout's spill, a ledger commit, a checkpoint, the metrics). Then
 * space returns (the tmpfs is grown in place) and `--resume` runs. Each resume must give the
 * uninterrupted run's draft byte for byte, or be refused by name: never exit 0 with another draft.
 * The failing run must name the device's state ("no space left") and the path.
 * Node-only, needs root (it mounts tmpfs); run by scripts/test-all.sh.  `tsx test/cli/train-full-disk.ts`
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const target = resolve(repo, process.env.SPECLAB_FIXTURES ?? '../shared/fixtures', 'hf/llama-tiny');
const root = mkdtempSync(join(tmpdir(), 'speclab-full-disk-'));
const FLAGS = [
  ...['--target', target, '--train-prompts', '8', '--eval-prompts', '1', '--response-length', '16', '--epochs', '3'],
  ...['--round-prompts', '4', '--batch-size', '2', '--max-new-tokens', '8', '--eval-train-prompts', '0'],
  ...['--checkpoint-every', '2', '--log-every', '1'],
];
const DRAFT_FILES = ['config.json', 'model.safetensors'];

let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail = ''): void {
  if (ok) passed++;
  else failed++;
  console.log(`[node] ${ok ? 'ok  ' : 'FAIL'} cli/train-full-disk › ${name}${ok || !detail ? '' : `: ${detail}`}`);
}

function train(out: string, extra: string[] = []): { code: number | null; output: string } {
  const r = spawnSync(process.execPath, ['bin/speclab.mjs', 'train', ...FLAGS, '--out', out, ...extra], {
    cwd: repo,
    encoding: 'utf8',
    timeout: 180_000,
  });
  return { code: r.status, output: `${r.stdout}${r.stderr}` };
}

function sameDraft(a: string, b: string): boolean {
  return DRAFT_FILES.every(
    (f) => existsSync(join(a, 'draft', f)) && readFileSync(join(a, 'draft', f)).equals(readFileSync(join(b, 'draft', f))),
  );
}

function kib(dir: string): number {
  return Number(execFileSync('du', ['-sk', dir], { encoding: 'utf8' }).split('\t')[0]);
}

const mounts: string[] = [];
try {
  const whole = join(root, 'whole');
  const reference = train(whole);
  check('an uninterrupted run exits 0 with its export', reference.code === 0 && sameDraft(whole, whole), reference.output.slice(-1500));
  // The run folder's peak is about its final size (checkpoints are pruned as it goes): fill points across it.
  const total = kib(whole);
  // Small disks fill at the first writes (settings.json, metrics.jsonl, sequences.json, a rollout round's spill files, the
  // ledger's journal at a commit: 4 to 132 KiB here); larger ones at a checkpoint.
  const sizes = [4, 8, 12, 20, 64, 128, 132, 192, ...[0.15, 0.55, 0.9].map((f) => Math.round(total * f))];
  for (const size of sizes) {
    const fraction = size / total;
    const mount = join(root, `disk-${size}k`);
    mkdirSync(mount);
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}k`, 'tmpfs', mount]);
    mounts.push(mount);
    const out = join(mount, 'run');
    const first = train(out);
    const named = /no space left/i.test(first.output) && first.output.includes(mount);
    const where = first.output.split('\n').find((l) => /no space left/i.test(l)) ?? '';
    console.log(`[node]      ${size} KiB: ${where.replaceAll(root, '…').slice(0, 240)}`);
    check(
      `${size} KiB disk (${Math.round(fraction * 100)}% of the run): the run fails, naming the full device and the path`,
      first.code !== 0 && named,
      `exit ${first.code}\n${first.output.slice(-1500)}`,
    );
    execFileSync('mount', ['-o', `remount,size=${total * 4}k`, mount]);
    const resumed = train(out, ['--resume']);
    const identical = resumed.code === 0 && sameDraft(out, whole);
    const refused =
      resumed.code !== 0 && /^(error: )?.+/m.test(resumed.output) && !/TypeError|RangeError|at .*\.ts:\d+/.test(resumed.output);
    if (!identical)
      console.log(`[node]      ${size} KiB, --resume: ${resumed.output.trim().split('\n').at(-1)!.replaceAll(root, '…').slice(0, 240)}`);
    check(
      `${size} KiB disk: after space returns, --resume gives the uninterrupted draft byte for byte, or is refused by name (${identical ? 'identical' : refused ? 'refused' : 'neither'})`,
      identical || refused,
      `exit ${resumed.code}\n${resumed.output.slice(-2000)}`,
    );
  }
} finally {
  for (const m of mounts) spawnSync('umount', [m]);
  rmSync(root, { recursive: true, force: true });
}
console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
