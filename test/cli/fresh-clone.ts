/**
 * A fresh clone runs the CLI after `npm ci` alone: without src/kernels/shaders.gen.ts (generated,
 * git-ignored), `speclab --help`, `train --help` and `--version` work (they load no GPU code and no
 * shaders) on Node and on Deno, and the first command that needs the kernels generates the file.
 * The clone is a copy of the files git tracks or would track (`git ls-files`), with node_modules
 * linked to this checkout's (an `npm ci` would install the same).
 * Node-only; run by scripts/test-all.sh.  `tsx test/cli/fresh-clone.ts`
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const clone = mkdtempSync(join(tmpdir(), 'speclab-fresh-clone-'));
let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail = ''): void {
  if (ok) passed++;
  else failed++;
  console.log(`[node] ${ok ? 'ok  ' : 'FAIL'} cli/fresh-clone › ${name}${ok || !detail ? '' : `: ${detail}`}`);
}

function run(command: string, args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(command, args, { cwd: clone, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, out: r.stdout ?? '', err: `${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

try {
  const listed = spawnSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: repo, encoding: 'utf8' });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  for (const file of listed.stdout.split('\0').filter((f) => f.length > 0)) {
    const from = join(repo, file);
    if (!existsSync(from) || !statSync(from).isFile()) continue; // deleted in the work tree
    mkdirSync(dirname(join(clone, file)), { recursive: true });
    copyFileSync(from, join(clone, file));
  }
  symlinkSync(join(repo, 'node_modules'), join(clone, 'node_modules'), 'dir');
  const shaders = join(clone, 'src/kernels/shaders.gen.ts');
  check('the clone has no generated shaders', !existsSync(shaders), 'src/kernels/shaders.gen.ts is tracked?');

  const help = run(process.execPath, ['bin/speclab.mjs', '--help']);
  check(
    'speclab --help exits 0',
    help.code === 0 && /Usage: speclab <command>/.test(help.out) && /\btrain\b/.test(help.out),
    `exit ${help.code}\n${help.out}${help.err}`,
  );
  const trainHelp = run(process.execPath, ['bin/speclab.mjs', 'train', '--help']);
  check(
    'speclab train --help exits 0 and lists the settings',
    trainHelp.code === 0 && /--batch-size <n>/.test(trainHelp.out),
    `exit ${trainHelp.code}\n${trainHelp.out}${trainHelp.err}`,
  );
  const version = run(process.execPath, ['bin/speclab.mjs', 'eval', '--version']);
  check(
    'speclab eval --version exits 0',
    version.code === 0 && /^\d+\.\d+\.\d+/.test(version.out),
    `exit ${version.code}\n${version.out}${version.err}`,
  );
  const bad = run(process.execPath, ['bin/speclab.mjs', 'train', '--bogus']);
  check(
    'an unknown option exits 2 with one line',
    bad.code === 2 && bad.err.trim().split('\n').length === 1 && /--bogus/.test(bad.err),
    `exit ${bad.code}\n${bad.err}`,
  );
  check('help needed no shaders', !existsSync(shaders), 'shaders.gen.ts appeared');

  const deno = join(repo, 'node_modules/.bin/deno');
  if (existsSync(deno)) {
    const denoHelp = run(deno, ['run', '-A', 'src/platform/deno-main.ts', 'prepare', '--help']);
    check(
      'deno: speclab prepare --help exits 0',
      denoHelp.code === 0 && /--response-length <n>/.test(denoHelp.out),
      `exit ${denoHelp.code}\n${denoHelp.out}${denoHelp.err}`,
    );
  }

  // A command that needs the kernels generates the shaders first (it may then fail for want of a GPU).
  const selfcheck = run(process.execPath, ['bin/speclab.mjs', 'selfcheck']);
  check(
    'selfcheck generates src/kernels/shaders.gen.ts and loads the kernels',
    existsSync(shaders) && !/ERR_MODULE_NOT_FOUND|shaders\.gen\.ts is missing/.test(`${selfcheck.out}${selfcheck.err}`),
    `exit ${selfcheck.code}\n${selfcheck.out.slice(-2000)}${selfcheck.err.slice(-2000)}`,
  );
} finally {
  rmSync(clone, { recursive: true, force: true });
}
console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
