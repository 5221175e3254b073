/**
 * What ./file-lock-race.ts and its worker need of the runtime they run in, Node or Deno: both run the
 * node: modules used here, so only the worker's command line and the platform whose FileStore is
 * raced differ.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface RaceWorker {
  send(line: string): void;
  nextLine(): Promise<string>;
  close(): void;
}

const isDeno = 'Deno' in globalThis;
const WORKER = fileURLToPath(new URL(isDeno ? './file-lock-race-worker-deno.ts' : './file-lock-race-worker-node.ts', import.meta.url));

function spawnWorker(dir: string): Promise<RaceWorker> {
  const args = isDeno ? ['run', '--allow-all', WORKER, dir] : ['--import', 'tsx', WORKER, dir];
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  const queued: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  lines.on('line', (line) => (waiting.length ? waiting.shift()!(line) : queued.push(line)));
  child.on('exit', (code) => {
    for (const w of waiting.splice(0)) w(`error - worker exited with ${code}`);
  });
  const worker: RaceWorker = {
    send: (line) => void child.stdin!.write(`${line}\n`),
    nextLine: () => (queued.length ? Promise.resolve(queued.shift()!) : new Promise((resolve) => waiting.push(resolve))),
    close: () => void child.stdin!.end(),
  };
  // Ready once it answers a ping (its platform module is loaded).
  worker.send('ping');
  return worker.nextLine().then((line) => {
    if (line !== 'pong') throw new Error(`lock race worker did not start: ${line}`);
    return worker;
  });
}

export async function raceRuntime() {
  return {
    name: isDeno ? 'deno' : 'node',
    args: process.argv.slice(2),
    hostname: hostname(),
    spawnWorker,
    makeTempDir: async () => mkdtempSync(join(tmpdir(), 'speclab-lock-race-')),
    removeDir: async (dir: string) => rmSync(dir, { recursive: true, force: true }),
    writeFile: async (path: string, text: string) => {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, text);
    },
    stdinLines: () => createInterface({ input: process.stdin }),
    print: (line: string) => void process.stdout.write(`${line}\n`),
    exit: (code: number) => process.exit(code),
  };
}
