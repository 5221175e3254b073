/**
 * Node platform: WebGPU through Dawn (npm package `webgpu`), files through node:fs.
 *
 * Dawn lifetime rules (see README, Troubleshooting):
 *  1. The object returned by `create()` must stay reachable while anything from it may still run; its
 *     event pump touches the instance, and a collected instance crashes the process (futex error,
 *     SIGSEGV in CallbackTaskManager::Flush). The process makes ONE instance, on the first request,
 *     and holds it until it exits; every context comes from it (and holds it too). An instance per
 *     context, let go one timer turn after its device was destroyed, could leave Dawn ticks scheduled
 *     for it (a paced tick sleeps first, so it runs later) to run after it was collected. One instance
 *     rules that out.
 *  2. A process that used Dawn does not exit while a device lives: `exit()` destroys every live
 *     context first, then ends the process.
 *  3. Dawn's event pump spins the main thread while a GPU promise is pending; on a CPU adapter that
 *     takes a core from the device. SPECLAB_GPU_WAIT=auto (the default: paced while every live context
 *     is on a fallback adapter) or paced sleeps between polls (dawn-wait-pacing.ts); spin waits as
 *     Dawn does.
 *  4. A dropped bind group's native memory returns only when V8 collects its wrapper, and V8 does not
 *     see that memory; every RECLAIM_EVERY_BIND_GROUPS bind groups the process runs a full collection
 *     (dawn-bind-group-reclaim.ts: on a CPU adapter each one is a memory mapping, and a process that
 *     runs out of mappings crashes in the driver).
 */
import { create, globals } from 'webgpu';
import { mkdirSync, promises as fs } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import process from 'node:process';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { hostname } from 'node:os';
import { environmentGpuRequest, GpuContext, openGpuContext, type GpuRequest } from '../gpu/context.ts';
import {
  autoWaitPacingMode,
  installWaitPacing,
  isWaitPacingInstalled,
  parseWaitPacingSetting,
  WaitPacer,
  type WaitPacingMode,
  type WaitPacingSetting,
  type WaitPacingStats,
} from './dawn-wait-pacing.ts';
import { BindGroupReclaimer } from './dawn-bind-group-reclaim.ts';
import type { Platform } from '../cli/platform.ts';
import type { ProgressDisplay } from '../ports/progress.ts';
import { terminalProgress } from './terminal-progress.ts';
import { keyValueDatabaseUnavailable, namingPath, type AppendLog, type FileLock, type FileStore } from '../ports/storage.ts';
import { joinChunks, overBudgetError, ReadBudgetMeter, type ReadBudget } from '../ports/read-budget.ts';
import { acquireFileLock, type LockFiles } from './file-lock.ts';

/** Dawn toggles: unsafe APIs expose subgroup matrices; NVIDIA hides shader-f16 unless asked. */
const DAWN_FLAGS = ['enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia'];

let globalsInstalled = false;
/** The process's one Dawn instance (rule 1 above): made on the first request, never let go. */
let dawnInstance: ReturnType<typeof create> | undefined;
/** The live contexts, for `auto` pacing and for `exit()`. */
const liveContexts = new Set<GpuContext>();

/** Rule 3: Dawn's ticks go through this pacer once the first context is asked for. */
const originalSetImmediate = globalThis.setImmediate;
const sleepCell = new Int32Array(new SharedArrayBuffer(4));
const waitPacer = new WaitPacer({
  immediate: (run) => originalSetImmediate(run),
  // Atomics.wait on a cell nobody notifies: a plain sub-millisecond sleep of this thread.
  sleepy: (run, ms) =>
    originalSetImmediate(() => {
      Atomics.wait(sleepCell, 0, 0, ms);
      run();
    }),
});

/**
 * V8's full collection: the `gc` that --expose-gc gives, or, without that flag, the same function
 * from a fresh context made after setting the flag (a flag set at run time applies to new contexts).
 */
function v8Collect(): () => void {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') return exposed as () => void;
  // The flag is process-wide: contexts and workers made later also see a global `gc`.
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** V8's collector, looked up on the first collection (a process that never needs one sets no flag). */
let collectGarbage: (() => void) | undefined;

/** Rule 4: made with the first context, shared by all (the mapping limit is per process). */
let bindGroupReclaimer: BindGroupReclaimer | undefined;

/** Full collections the bind-group count has run so far (for tests and diagnostics). */
export function nodeBindGroupCollections(): number {
  return bindGroupReclaimer?.collections ?? 0;
}

/** SPECLAB_GPU_WAIT, read once, before the first context is opened. */
let waitSetting: WaitPacingSetting = 'auto';

/** Set the pacing mode from the setting and the adapters of the live contexts. */
function updateWaitPacing(): void {
  waitPacer.mode = waitSetting === 'auto' ? autoWaitPacingMode([...liveContexts].map((c) => c.record)) : waitSetting;
}

/**
 * How Dawn's waits are scheduled now, whether the pacer is installed (not under `spin`), and the
 * ticks it has scheduled so far (for tests and benchmarks).
 */
export function nodeGpuWaitPacing(): { mode: WaitPacingMode; installed: boolean; stats: Readonly<WaitPacingStats> } {
  return { mode: waitPacer.mode, installed: waitSetting !== 'spin' && globalsInstalled, stats: { ...waitPacer.stats } };
}

export async function acquireNodeGpu(request: GpuRequest = {}): Promise<GpuContext> {
  if (!globalsInstalled) {
    waitSetting = parseWaitPacingSetting(process.env.SPECLAB_GPU_WAIT); // a bad value fails before any GPU work
    // GPUBufferUsage, GPUShaderStage, GPUMapMode ... are needed by code written for browsers.
    Object.assign(globalThis, globals);
    // Under `spin` nothing is wrapped: the process runs Dawn's pump exactly as before.
    // A second copy of this module (another module graph in the same process) finds the first copy's
    // wrapper in place; Dawn's ticks then go through that copy's pacer.
    const target = globalThis as unknown as Parameters<typeof installWaitPacing>[0];
    if (waitSetting !== 'spin' && !isWaitPacingInstalled(target)) installWaitPacing(target, waitPacer);
    globalsInstalled = true;
  }
  dawnInstance ??= create(DAWN_FLAGS);
  const reclaimer = (bindGroupReclaimer ??= new BindGroupReclaimer(() => (collectGarbage ??= v8Collect())()));
  const ctx = await openGpuContext({
    runtime: 'node',
    gpu: dawnInstance as unknown as GPU,
    keepAlive: dawnInstance,
    request: environmentGpuRequest(request, (name) => process.env[name]),
    onDestroy: (c) => {
      liveContexts.delete(c);
      updateWaitPacing();
    },
    onBindGroupCreated: () => reclaimer.created(),
  });
  liveContexts.add(ctx);
  updateWaitPacing();
  return ctx;
}

export function liveNodeGpuContexts(): number {
  return liveContexts.size;
}

export class NodeFileStore implements FileStore {
  readonly root: string;
  constructor(root: string) {
    this.root = resolve(root);
  }
  private abs(path: string): string {
    if (path.split('/').includes('..')) throw new Error(`path "${path}" escapes the store ${this.root}`);
    return join(this.root, path);
  }
  async read(path: string, budget?: ReadBudget): Promise<Uint8Array> {
    const abs = this.abs(path);
    return namingPath(abs, 'read', async () => (budget ? readWithinBudget(abs, budget) : new Uint8Array(await fs.readFile(abs))));
  }
  async readRange(path: string, offset: number, length: number): Promise<Uint8Array> {
    const abs = this.abs(path);
    return namingPath(abs, `read of ${length} bytes at ${offset}`, () => this.readRangeAt(abs, offset, length));
  }
  private async readRangeAt(abs: string, offset: number, length: number): Promise<Uint8Array> {
    const handle = await fs.open(abs, 'r');
    try {
      const out = new Uint8Array(length);
      const { bytesRead } = await handle.read(out, 0, length, offset);
      if (bytesRead !== length) {
        throw new Error(`${abs}: wanted ${length} bytes at offset ${offset}, file has only ${bytesRead} there`);
      }
      return out;
    } finally {
      await handle.close();
    }
  }
  async size(path: string): Promise<number> {
    const abs = this.abs(path);
    return namingPath(abs, 'stat', async () => (await fs.stat(abs)).size);
  }
  async writeAtomic(path: string, bytes: Uint8Array): Promise<void> {
    await this.writeAtomicChunks(path, oneChunk(bytes), `atomic write of ${bytes.byteLength} bytes`);
  }
  async writeAtomicChunks(path: string, chunks: AsyncIterable<Uint8Array>, what = 'atomic write'): Promise<number> {
    const target = this.abs(path);
    const temp = `${target}.tmp-${process.pid}-${Date.now()}`;
    return namingPath(target, what, async () => {
      mkdirSync(dirname(target), { recursive: true });
      const handle = await fs.open(temp, 'w');
      let written = 0;
      try {
        for await (const chunk of chunks) {
          await handle.writeFile(chunk);
          written += chunk.byteLength;
        }
        await handle.sync();
      } catch (err) {
        // A full disk must not leave a half-written temp file behind; the target is untouched.
        await handle.close();
        await fs.rm(temp, { force: true });
        throw err;
      }
      await handle.close();
      await fs.rename(temp, target);
      return written;
    });
  }
  async exists(path: string): Promise<boolean> {
    try {
      await fs.stat(this.abs(path));
      return true;
    } catch {
      return false;
    }
  }
  async list(dir: string): Promise<string[]> {
    try {
      return (await fs.readdir(this.abs(dir))).sort();
    } catch {
      return [];
    }
  }
  async remove(path: string): Promise<void> {
    await fs.rm(this.abs(path), { recursive: true, force: true });
  }
  async lockExclusive(path: string): Promise<FileLock> {
    const target = this.abs(path);
    mkdirSync(dirname(target), { recursive: true });
    return acquireFileLock(NODE_LOCK_FILES, target, { pid: process.pid, host: hostname() });
  }
  async openAppendLog(path: string): Promise<AppendLog> {
    const target = this.abs(path);
    mkdirSync(dirname(target), { recursive: true });
    const handle = await fs.open(target, 'a');
    await syncDirectory(dirname(target));
    let closed = false;
    return {
      path: target,
      async append(bytes: Uint8Array, options: { sync?: boolean } = {}): Promise<void> {
        if (closed) throw new Error(`${target}: append after close`);
        await namingPath(target, `append of ${bytes.length} bytes`, async () => {
          let written = 0;
          while (written < bytes.length) written += (await handle.write(bytes, written, bytes.length - written)).bytesWritten;
          if (options.sync) await handle.sync();
        });
      },
      async close(): Promise<void> {
        if (closed) return;
        closed = true;
        await handle.close();
      },
    };
  }
}

/**
 * Makes a directory's entries (a new file, a rename) durable. POSIX only: Windows cannot open a
 * directory as a file, and NTFS journals its metadata itself.
 */
async function syncDirectory(dir: string): Promise<void> {
  if (process.platform === 'win32') return;
  const handle = await fs.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The one terminal display of this process (its bars and the lines printed above them). */
let terminal: ProgressDisplay | undefined;

export const nodePlatform: Platform = {
  name: 'node',
  acquireGpu: acquireNodeGpu,
  files: (root) => new NodeFileStore(root),
  openKeyValueDatabase: (dbName) => keyValueDatabaseUnavailable('node', dbName),
  deleteKeyValueDatabase: (dbName) => keyValueDatabaseUnavailable('node', dbName),
  env: (name) => process.env[name],
  args: () => process.argv.slice(2),
  async exit(code: number): Promise<never> {
    for (const ctx of [...liveContexts]) ctx.destroy();
    // Give Dawn one turn to process the destroys before the process goes.
    await new Promise((r) => setTimeout(r, 10));
    process.exit(code);
  },
  // Loaded on first use, so commands that never reach Redis do not load its client.
  connectRedis: async (url) => {
    const { connectRedis, redisOptionsFromEnv } = await import('./redis-node.ts');
    return connectRedis(
      url,
      redisOptionsFromEnv((name) => process.env[name]),
    );
  },
  startGateway: async (options) => (await import('./control-gateway-node.ts')).startRunGateway(options),
  // Loaded on first use, so commands given a folder never load the Hub client; through `this`, so a platform made from this one with its own env and files (a test's) resolves with them.
  async resolveModel(spec, progress, options) {
    const { resolveHubModel } = await import('./hf-hub-node.ts');
    return resolveHubModel(
      spec,
      (name) => this.env(name),
      (root) => this.files(root),
      progress,
      options,
    );
  },
  // Bars only on a terminal: a log or a pipe gets the plain progress lines.
  progressDisplay: () => (process.stdout.isTTY ? (terminal ??= terminalProgress(process.stdout)) : undefined),
  onInterrupt(handler) {
    const onInt = () => handler('SIGINT');
    const onTerm = () => handler('SIGTERM');
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
    return () => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    };
  },
};

async function* oneChunk(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

/** The lock algorithm's file calls (./file-lock.ts), on node:fs. */
const NODE_LOCK_FILES: LockFiles = {
  writeText: (path, text) => fs.writeFile(path, text),
  async link(existing, path) {
    try {
      await fs.link(existing, path);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    }
  },
  readText: (path) => fs.readFile(path, 'utf8').catch(() => null),
  remove: (path) => fs.rm(path, { force: true }),
  ownerGone: async (owner) => owner.host === hostname() && !processAlive(owner.pid),
};

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Chunk size of a budgeted read: large enough to be fast, small enough that a refusal costs little. */
const READ_CHUNK_BYTES = 4 * 2 ** 20;

/**
 * Reads `abs` as a stream under `budget`: a regular file over it is refused from its size alone;
 * anything else (a device, a FIFO, a growing file) is refused once the bytes read pass it.
 */
async function readWithinBudget(abs: string, budget: ReadBudget): Promise<Uint8Array> {
  const handle = await fs.open(abs, 'r');
  try {
    const stat = await handle.stat();
    if (stat.isFile() && stat.size > budget.maxBytes) throw overBudgetError(abs, budget);
    const meter = new ReadBudgetMeter(abs, budget);
    const chunks: Uint8Array[] = [];
    let total = 0;
    for (;;) {
      const chunk = new Uint8Array(READ_CHUNK_BYTES);
      const { bytesRead } = await handle.read(chunk, 0, chunk.byteLength, null);
      if (bytesRead === 0) break;
      const got = chunk.subarray(0, bytesRead);
      meter.take(got);
      chunks.push(got);
      total += bytesRead;
    }
    return joinChunks(chunks, total);
  } finally {
    await handle.close();
  }
}
