/**
 * Node-only test helper: a private redis-server on a free loopback port in a temp dir, with
 * persistence off. Imported dynamically by node-only tests (never at the top of a suite file, so
 * the browser bundle and Deno never load node:child_process).
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
  /** Sends the server a signal (SIGSTOP freezes it, SIGCONT thaws it). */
  signal(sig: NodeJS.Signals): void;
  stop(): Promise<void>;
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

export async function startRedisServer(): Promise<RedisServer> {
  let lastError: unknown;
  // Another process may grab the port between freePort() and redis binding it: retry a few times.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'speclab-redis-'));
    const child = spawn(REDIS_BIN, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--protected-mode', 'yes'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // If the test process ends without stop() (a timed-out test never reaches its finally), take
    // the server down with it instead of leaving an orphan behind.
    const onExit = (): void => {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    };
    process.once('exit', onExit);
    try {
      await waitReady(child);
      return {
        url: `redis://127.0.0.1:${port}/0`,
        port,
        signal: (sig) => void child.kill(sig),
        stop: async () => {
          child.kill('SIGCONT');
          process.removeListener('exit', onExit);
          await stopChild(child);
          rmSync(dir, { recursive: true, force: true });
        },
      };
    } catch (err) {
      lastError = err;
      process.removeListener('exit', onExit);
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    }
  }
  throw new Error(`could not start ${REDIS_BIN}: ${String(lastError)}`);
}

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
