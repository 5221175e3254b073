/**
 * Node-only test helper: runs `speclab <command>` (bin/speclab.mjs), or another Node script, as a
 * real child process of this Node, from the repository root, collecting its output and exit code.
 * Imported dynamically by node-only suites (never at the top of a suite file, so the browser bundle
 * and Deno never load node:child_process).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

/** How long a child past its timeout gets to write its diagnostic report before the SIGKILL. */
const REPORT_GRACE_MS = 2000;

/**
 * The JavaScript and native stacks of the Node diagnostic report a hung child wrote into `dir` (on
 * SIGUSR2), for the failure message: where it was stuck, when it printed nothing to say so itself.
 */
function hungReport(dir: string, timeoutMs: number): string {
  const head = `\n[test harness] no exit after ${timeoutMs} ms: SIGUSR2 for a Node diagnostic report, then SIGKILL`;
  const file = readdirSync(dir).find((f) => f.endsWith('.json'));
  if (!file) return `${head}; no report was written (stuck in native code, or not a Node process)\n`;
  const report = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
    javascriptStack?: { message?: string; stack?: string[] };
    nativeStack?: { symbol?: string }[];
    libuv?: { type?: string; is_active?: boolean; remoteEndpoint?: { host?: string; port?: number } }[];
  };
  // What an idle event loop waits on (a socket to a server that never answers, a timer).
  const handles = (report.libuv ?? [])
    .filter((h) => h.is_active)
    .map((h) => (h.remoteEndpoint ? `${h.type} to ${h.remoteEndpoint.host}:${h.remoteEndpoint.port}` : h.type))
    .join(', ');
  const js = report.javascriptStack?.stack?.slice(0, 20).join('\n    ') ?? '(none)';
  const native = (report.nativeStack ?? [])
    .slice(0, 20)
    .map((f) => f.symbol ?? '?')
    .join('\n    ');
  return `${head}. Active libuv handles: ${handles || '(none)'}. JavaScript stack (${report.javascriptStack?.message ?? ''}):\n    ${js}\nnative stack:\n    ${native}\n`;
}

/** Starts `node ...nodeArgs` (a script and its arguments) in the repository root. */
export function startNode(nodeArgs: readonly string[], options: NodeProcessOptions): CliProcess {
  const env = options.env ? { ...process.env, ...options.env } : process.env;
  // A child still running at its timeout is asked for Node's diagnostic report (SIGUSR2) before the
  // SIGKILL, and its stacks join its output (hungReport).
  const reportDir = mkdtempSync(join(tmpdir(), 'speclab-child-report-'));
  const reportFlags = ['--report-on-signal', '--report-signal=SIGUSR2', `--report-directory=${reportDir}`];
  const child = spawn(process.execPath, [...reportFlags, ...nodeArgs], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  let timedOut = false;
  let grace: ReturnType<typeof setTimeout> | undefined;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGUSR2');
    grace = setTimeout(() => child.kill('SIGKILL'), REPORT_GRACE_MS);
  }, options.timeoutMs);
  const exited = new Promise<ProcessExit>((resolve, reject) => {
    child.once('error', (err) => {
      rmSync(reportDir, { recursive: true, force: true });
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(grace);
      if (timedOut) output += hungReport(reportDir, options.timeoutMs);
      rmSync(reportDir, { recursive: true, force: true });
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
