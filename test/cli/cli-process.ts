/**
 * Node-only test helper: runs `speclab <command>` (bin/speclab.mjs) as a real child process of
 * this Node, from the repository root, collecting its output and exit code. Imported dynamically
 * by node-only suites (never at the top of a suite file, so the browser bundle and Deno never load
 * node:child_process).
 */
import { spawn } from 'node:child_process';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

export interface CliProcess {
  readonly pid: number;
  /** stdout and stderr so far, interleaved as they arrived. */
  output(): string;
  /** Resolves with the exit code (null when a signal ended it) and everything it printed. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }>;
  /** Sends a signal (SIGINT: what Ctrl-C sends). */
  signal(sig: NodeJS.Signals): void;
  /** Resolves once the output matches `pattern` (rejects when the process exits first). */
  waitFor(pattern: RegExp): Promise<void>;
  /** SIGKILL, for a test that gives up on it. */
  kill(): void;
}

/** Starts `node bin/speclab.mjs ...args` in the repository root; `timeoutMs` SIGKILLs a hung one. */
export function startCli(args: readonly string[], timeoutMs = 120_000): CliProcess {
  const child = spawn(process.execPath, ['bin/speclab.mjs', ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
  const waitFor = async (pattern: RegExp): Promise<void> => {
    let done = false;
    void exited.finally(() => (done = true));
    while (!pattern.test(output)) {
      if (done) throw new Error(`speclab ${args[0]} exited before printing ${pattern}:\n${output.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { pid: child.pid ?? -1, output: () => output, exited, signal: (sig) => child.kill(sig), waitFor, kill: () => child.kill('SIGKILL') };
}
