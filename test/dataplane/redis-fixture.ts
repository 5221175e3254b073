/**
 * Node-only test helper: a private redis-server on a free loopback port in a temp dir, with
 * persistence off, or with `{ durable: true }` an append-only file fsynced before every reply
 * (appendfsync always). A durable server can be SIGKILLed (`kill`) and started again from the same
 * `dir` and `port`, replaying its AOF. Imported dynamically by node-only tests (never at the top of
 * a suite file, so the browser bundle and Deno never load node:child_process).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  /** The server's working dir (its AOF lives here when durable). */
  readonly dir: string;
  /** Sends the server a signal (SIGSTOP freezes it, SIGCONT thaws it). */
  signal(sig: NodeJS.Signals): void;
  /** SIGKILL (a crash: nothing flushed on the way out), wait for the exit, keep `dir`. */
  kill(): Promise<void>;
  /** Graceful stop, then removes `dir` (also one passed in, so stop only the last server on a dir). */
  stop(): Promise<void>;
}

export interface RedisServerOptions {
  /** appendonly yes + appendfsync always (default false: persistence off). */
  readonly durable?: boolean;
  /** Reuse this working dir (e.g. a killed server's), replaying what it holds; default a fresh temp dir. */
  readonly dir?: string;
  /** Listen here (e.g. a killed server's port); default a free port. */
  readonly port?: number;
}

const REDIS_BIN = '/usr/bin/redis-server';

/** A port the kernel just handed out on 127.0.0.1 (released again before redis binds it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const persistence = options.durable ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'];
  let lastError: unknown;
  // Another process may grab the port between freePort() and redis binding it: retry a few times
  // (only when the port is ours to pick).
  for (let attempt = 0; attempt < (options.port === undefined ? 3 : 1); attempt++) {
    const port = options.port ?? (await freePort());
    const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'speclab-redis-'));
    const child = spawn(
      REDIS_BIN,
      ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...persistence, '--protected-mode', 'yes'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    // If the test process ends without stop() (a timed-out test never reaches its finally), take
    // the server down with it instead of leaving an orphan behind.
    const onExit = (): void => {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    };
    onProcessExit.add(onExit);
    try {
      await waitReady(child);
      return {
        url: `redis://127.0.0.1:${port}/0`,
        port,
        dir,
        signal: (sig) => void child.kill(sig),
        kill: async () => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = new Promise((resolve) => child.once('exit', resolve));
          child.kill('SIGKILL');
          await exited;
        },
        stop: async () => {
          child.kill('SIGCONT');
          onProcessExit.delete(onExit);
          await stopChild(child);
          rmSync(dir, { recursive: true, force: true });
        },
      };
    } catch (err) {
      lastError = err;
      onProcessExit.delete(onExit);
      await stopChild(child);
      // A dir passed in is the caller's (it may hold a killed server's AOF): leave it.
      if (options.dir === undefined) rmSync(dir, { recursive: true, force: true });
    }
  }
  throw new Error(`could not start ${REDIS_BIN}: ${String(lastError)}`);
}

/** One 'exit' listener for every live server (a crash matrix starts more than Node's listener warning allows). */
const onProcessExit = new Set<() => void>();
process.once('exit', () => {
  for (const cleanup of onProcessExit) cleanup();
});

function waitReady(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => reject(new Error(`redis-server not ready after 10 s:\n${log}`)), 10_000);
    const onData = (chunk: Buffer): void => {
      log += chunk.toString();
      if (log.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code}:\n${log}`));
    });
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
