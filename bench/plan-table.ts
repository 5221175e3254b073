/**
 * The `speclab plan` tables of bench/RESULTS.md ("Plans without weights"): for each target config and
 * sequence length, runs `node bin/speclab.mjs plan … --json` (the real command, in a child process),
 * and prints one Markdown section with the command, the exit code, the sample, checkpoint and spill
 * bytes, a table of every item for each role, and each role's first problems and suggestions.
 *
 *   npx tsx bench/plan-table.ts [--configs bench/configs/llama-3.1-8b,bench/configs/qwen3-8b] [--lengths 2048,8192]
 *       [-- extra plan flags]
 */
import { spawnSync } from 'node:child_process';
import process from 'node:process';
import { formatBytes } from '../src/util/bytes.ts';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
const args = dash >= 0 ? argv.slice(0, dash) : argv;
const extra = dash >= 0 ? argv.slice(dash + 1) : [];
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const configs = opt('--configs', 'bench/configs/llama-3.1-8b,bench/configs/qwen3-8b').split(',');
const lengths = opt('--lengths', '2048,8192').split(',');
const FLAGS = [
  '--target-precision',
  'f16',
  '--feature-precision',
  'f16',
  '--draft-vocab-size',
  '32000',
  '--ttt-length',
  '7',
  '--batch-size',
  '1',
];

interface RoleLine {
  role: string;
  command: string;
  totalBytes: number;
  phases: { phase: string; bytes: number }[];
  fits: boolean;
  sampleBytes: number;
  checkpointBytes: number;
  checkpointEvery?: number;
  spillBytes: number;
  sharedStoreBytes: number;
  limits: { maxStorageBufferBindingSize: number; maxBufferSize: number };
  items: { key: string; label: string; bytes: number }[];
  problems: string[];
  suggestions: string[];
}

for (const dir of configs) {
  for (const length of lengths) {
    const planArgs = ['bin/speclab.mjs', 'plan', '--target', dir, '--max-length', length, '--json', ...FLAGS, ...extra];
    const run = spawnSync(process.execPath, planArgs, { encoding: 'utf8' });
    const lines = run.stdout
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as RoleLine);
    if (lines.length === 0) throw new Error(`plan for ${dir} at ${length} printed no JSON line:\n${run.stderr}`);
    const [colocated] = lines;
    const labels = [...new Set(lines.flatMap((l) => l.items.map((i) => i.label)))];
    const name = dir.split('/').at(-1);
    console.log(`#### ${name}, ${length} tokens\n\n\`\`\`\nnode ${planArgs.join(' ')}\n\`\`\`\n`);
    console.log(
      `Exit code ${run.status}. One sample ${formatBytes(colocated.sampleBytes)} (${colocated.sampleBytes} bytes); one checkpoint ${formatBytes(colocated.checkpointBytes)} (${colocated.checkpointBytes} bytes), at most every ${colocated.checkpointEvery} steps; spill ${formatBytes(colocated.spillBytes)}; a cluster run's Redis up to ${formatBytes(lines.find((l) => l.sharedStoreBytes > 0)?.sharedStoreBytes ?? 0)}.\n`,
    );
    const limit = colocated.limits;
    console.log(`| item | ${lines.map((l) => `${l.role} (\`${l.command}\`)`).join(' | ')} |`);
    console.log(`| --- | ${lines.map(() => '---:').join(' | ')} |`);
    for (const label of labels)
      console.log(
        `| ${label} | ${lines.map((l) => ((b) => (b === undefined ? '—' : formatBytes(b)))(l.items.find((i) => i.label === label)?.bytes)).join(' | ')} |`,
      );
    for (const phase of colocated.phases.map((p) => p.phase))
      console.log(
        `| *phase: ${phase}* | ${lines.map((l) => `*${formatBytes(l.phases.find((p) => p.phase === phase)!.bytes)}*`).join(' | ')} |`,
      );
    console.log(`| **total (the largest phase)** | ${lines.map((l) => `**${formatBytes(l.totalBytes)}**`).join(' | ')} |`);
    console.log(
      `| fits (${formatBytes(limit.maxStorageBufferBindingSize)} bindings, ${formatBytes(limit.maxBufferSize)} buffers) | ${lines.map((l) => (l.fits ? 'yes' : 'no')).join(' | ')} |\n`,
    );
    for (const l of lines) {
      if (l.fits) continue;
      console.log(
        `- ${l.role}: ${l.problems.length} problem${l.problems.length === 1 ? '' : 's'}, e.g. ${l.problems.slice(0, 2).join('; ')}. Suggestions: ${l.suggestions.slice(0, 3).join('; ')}.`,
      );
    }
    console.log('');
  }
}
