/**
 * Node-only test helper: runs `speclab <command>` (bin/speclab.mjs), or another Node script, as a
 * real child process of this Node, from the repository root, collecting its output and exit code.
 * Imported dynamically by node-only suites (never at the top of a suite file, so the browser bundle
 * and Deno never load node:child_process).
 */
import { spawn } from 'node:child_process';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** How a child process ended: its exit code (null when a signal ended it), the signal, and everything it printed. */
export interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
}

export interface CliProcess {
  readonly pid: number;
  /** stdout and stderr so far, interleaved as they arrived. */
  output(): string;
  /** Resolves with the exit code (null when a signal ended it) and everything it printed. */
  readonly exited: Promise<ProcessExit>;
  /** Sends a signal (SIGINT: what Ctrl-C sends). */
  signal(sig: NodeJS.Signals): void;
  /** Resolves once the output matches `pattern` (rejects when the process exits first). */
  waitFor(pattern: RegExp): Promise<void>;
  /** SIGKILL, for a test that gives up on it. */
  kill(): void;
}

export interface NodeProcessOptions {
  /** Names the process in the error of a `waitFor` it exits before satisfying. */
  readonly name: string;
  /** SIGKILLs a hung process after this long. */
  readonly timeoutMs: number;
  /** How often `waitFor` looks at the output. */
  readonly pollMs: number;
  /** Environment variables over this process's own. */
  readonly env?: Readonly<Record<string, string>>;
}

/** Starts `node ...nodeArgs` (a script and its arguments) in the repository root. */
export function startNode(nodeArgs: readonly string[], options: NodeProcessOptions): CliProcess {
  const env = options.env ? { ...process.env, ...options.env } : process.env;
  const child = spawn(process.execPath, nodeArgs, { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
  const exited = new Promise<ProcessExit>((resolve, reject) => {
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
      if (done) throw new Error(`${options.name} exited before printing ${pattern}:\n${output.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, options.pollMs));
    }
  };
  return {
    pid: child.pid ?? -1,
    output: () => output,
    exited,
    signal: (sig) => child.kill(sig),
    waitFor,
    kill: () => child.kill('SIGKILL'),
  };
}

/** Starts `node bin/speclab.mjs ...args` in the repository root; `timeoutMs` SIGKILLs a hung one. */
export function startCli(args: readonly string[], timeoutMs = 120_000, env?: Readonly<Record<string, string>>): CliProcess {
  return startNode(['bin/speclab.mjs', ...args], { name: `speclab ${args[0]}`, timeoutMs, pollMs: 20, env });
}
