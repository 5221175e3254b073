/**
 * Deno platform: Deno's built-in WebGPU (wgpu) and Deno's file APIs.
 * Deno's WGSL front end (naga) is stricter than Dawn's (Tint); every kernel has a variant that
 * needs no optional feature, and features are read from the adapter, never assumed.
 */
import { environmentGpuRequest, GpuContext, openGpuContext, type GpuRequest } from '../gpu/context.ts';
import type { Platform } from '../cli/platform.ts';
import { keyValueDatabaseUnavailable, namingPath, type AppendLog, type FileLock, type FileStore } from '../ports/storage.ts';
import { joinChunks, overBudgetError, ReadBudgetMeter, type ReadBudget } from '../ports/read-budget.ts';
import { acquireFileLock, type LockFiles } from './file-lock.ts';

const live = new Set<GpuContext>();

async function* oneChunk(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

class DenoFileStore implements FileStore {
  constructor(readonly root: string) {}
  private abs(path: string): string {
    if (path.split('/').includes('..')) throw new Error(`path "${path}" escapes the store ${this.root}`);
    return `${this.root}/${path}`;
  }
  async read(path: string, budget?: ReadBudget): Promise<Uint8Array> {
    const abs = this.abs(path);
    return namingPath(abs, 'read', () => (budget ? readWithinBudget(abs, budget) : Deno.readFile(abs)));
  }
  async readRange(path: string, offset: number, length: number): Promise<Uint8Array> {
    const abs = this.abs(path);
    return namingPath(abs, `read of ${length} bytes at ${offset}`, () => this.readRangeAt(abs, offset, length));
  }
  private async readRangeAt(abs: string, offset: number, length: number): Promise<Uint8Array> {
    const file = await Deno.open(abs, { read: true });
    try {
      await file.seek(offset, Deno.SeekMode.Start);
      const out = new Uint8Array(length);
      let filled = 0;
      while (filled < length) {
        const n = await file.read(out.subarray(filled));
        if (n === null) throw new Error(`${abs}: wanted ${length} bytes at offset ${offset}, file ends early`);
        filled += n;
      }
      return out;
    } finally {
      file.close();
    }
  }
  async size(path: string): Promise<number> {
    const abs = this.abs(path);
    return namingPath(abs, 'stat', async () => (await Deno.stat(abs)).size);
  }
  async writeAtomic(path: string, bytes: Uint8Array): Promise<void> {
    await this.writeAtomicChunks(path, oneChunk(bytes), `atomic write of ${bytes.byteLength} bytes`);
  }
  async writeAtomicChunks(path: string, chunks: AsyncIterable<Uint8Array>, what = 'atomic write'): Promise<number> {
    const target = this.abs(path);
    const temp = `${target}.tmp-${Deno.pid}-${Date.now()}`;
    return namingPath(target, what, async () => {
      await Deno.mkdir(target.slice(0, target.lastIndexOf('/')), { recursive: true });
      const file = await Deno.open(temp, { write: true, create: true, truncate: true });
      let total = 0;
      try {
        for await (const bytes of chunks) {
          let written = 0;
          while (written < bytes.length) written += await file.write(bytes.subarray(written));
          total += written;
        }
        await file.sync();
      } catch (err) {
        // A full disk must not leave a half-written temp file behind; the target is untouched.
        file.close();
        await Deno.remove(temp).catch(() => {});
        throw err;
      }
      file.close();
      await Deno.rename(temp, target);
      return total;
    });
  }
  async exists(path: string): Promise<boolean> {
    try {
      await Deno.stat(this.abs(path));
      return true;
    } catch {
      return false;
    }
  }
  async list(dir: string): Promise<string[]> {
    const names: string[] = [];
    try {
      for await (const entry of Deno.readDir(this.abs(dir))) names.push(entry.name);
    } catch {
      return [];
    }
    return names.sort();
  }
  async remove(path: string): Promise<void> {
    await Deno.remove(this.abs(path), { recursive: true }).catch(() => {});
  }
  async lockExclusive(path: string): Promise<FileLock> {
    const target = this.abs(path);
    await Deno.mkdir(target.slice(0, target.lastIndexOf('/')), { recursive: true });
    return acquireFileLock(DENO_LOCK_FILES, target, { pid: Deno.pid, host: hostName() });
  }
  async openAppendLog(path: string): Promise<AppendLog> {
    const target = this.abs(path);
    await Deno.mkdir(target.slice(0, target.lastIndexOf('/')), { recursive: true });
    const file = await Deno.open(target, { append: true, create: true });
    await syncDirectory(target.slice(0, target.lastIndexOf('/')));
    let closed = false;
    return {
      path: target,
      async append(bytes: Uint8Array, options: { sync?: boolean } = {}): Promise<void> {
        if (closed) throw new Error(`${target}: append after close`);
        let written = 0;
        while (written < bytes.length) written += await file.write(bytes.subarray(written));
        if (options.sync) await file.sync();
      },
      async close(): Promise<void> {
        if (closed) return;
        closed = true;
        file.close();
      },
    };
  }
}

/**
 * Makes a directory's entries (a new file, a rename) durable. POSIX only: Windows cannot open a
 * directory as a file, and NTFS journals its metadata itself.
 */
async function syncDirectory(dir: string): Promise<void> {
  if (Deno.build.os === 'windows') return;
  const handle = await Deno.open(dir, { read: true });
  try {
    await handle.sync();
  } finally {
    handle.close();
  }
}

export const denoPlatform: Platform = {
  name: 'deno',
  async acquireGpu(request: GpuRequest = {}) {
    const ctx = await openGpuContext({
      runtime: 'deno',
      gpu: navigator.gpu,
      keepAlive: navigator.gpu,
      request: environmentGpuRequest(request, (name) => Deno.env.get(name)),
      onDestroy: (c) => live.delete(c),
    });
    live.add(ctx);
    return ctx;
  },
  files: (root) => new DenoFileStore(root),
  openKeyValueDatabase: (dbName) => keyValueDatabaseUnavailable('deno', dbName),
  deleteKeyValueDatabase: (dbName) => keyValueDatabaseUnavailable('deno', dbName),
  env: (name) => Deno.env.get(name),
  args: () => [...Deno.args],
  async exit(code: number): Promise<never> {
    for (const ctx of [...live]) ctx.destroy();
    Deno.exit(code);
  },
  onInterrupt(handler) {
    // Windows has SIGINT (Ctrl-C) but no SIGTERM listener.
    const signals = (Deno.build.os === 'windows' ? ['SIGINT'] : ['SIGINT', 'SIGTERM']) as ('SIGINT' | 'SIGTERM')[];
    const listeners = signals.map((signal) => [signal, () => handler(signal)] as const);
    for (const [signal, listener] of listeners) Deno.addSignalListener(signal, listener);
    return () => {
      for (const [signal, listener] of listeners) Deno.removeSignalListener(signal, listener);
    };
  },
};

/** The lock algorithm's file calls (./file-lock.ts), on Deno's file API. */
const DENO_LOCK_FILES: LockFiles = {
  writeText: (path, text) => Deno.writeTextFile(path, text),
  async link(existing, path) {
    try {
      await Deno.link(existing, path);
      return true;
    } catch (err) {
      if (err instanceof Deno.errors.AlreadyExists) return false;
      throw err;
    }
  },
  readText: (path) => Deno.readTextFile(path).catch(() => null),
  remove: (path) => Deno.remove(path).catch(() => {}),
  ownerGone: async (owner) => owner.host === hostName() && (await processGone(owner.pid)),
};

/**
 * Whether `pid` is known to have ended. Deno has no signal-0 probe; on Linux /proc tells, but Deno
 * opens /proc only under --allow-all. Where it cannot look, nothing is known and the lock is treated
 * as held: refused (the message says to delete it if its owner is gone), never stolen.
 */
async function processGone(pid: number): Promise<boolean> {
  try {
    await Deno.stat('/proc/self');
  } catch {
    return false;
  }
  try {
    await Deno.stat(`/proc/${pid}`);
    return false;
  } catch {
    return true;
  }
}

/**
 * This machine's name for lock files. `Deno.hostname()` needs --allow-sys, which the CLI does not
 * otherwise ask for; /etc/hostname is readable with --allow-read. A lock written under one name and
 * checked under another is treated as another machine's, so it is refused, never stolen.
 */
function hostName(): string {
  try {
    return Deno.hostname();
  } catch {
    try {
      return Deno.readTextFileSync('/etc/hostname').trim() || 'unknown-host';
    } catch {
      return 'unknown-host';
    }
  }
}

/** Chunk size of a budgeted read: large enough to be fast, small enough that a refusal costs little. */
const READ_CHUNK_BYTES = 4 * 2 ** 20;

/**
 * Reads `abs` as a stream under `budget`: a regular file over it is refused from its size alone;
 * anything else (a device, a FIFO, a growing file) is refused once the bytes read pass it.
 */
async function readWithinBudget(abs: string, budget: ReadBudget): Promise<Uint8Array> {
  const file = await Deno.open(abs, { read: true });
  try {
    const stat = await file.stat();
    if (stat.isFile && stat.size > budget.maxBytes) throw overBudgetError(abs, budget);
    const meter = new ReadBudgetMeter(abs, budget);
    const chunks: Uint8Array[] = [];
    let total = 0;
    for (;;) {
      const chunk = new Uint8Array(READ_CHUNK_BYTES);
      const n = await file.read(chunk);
      if (n === null) break;
      const got = chunk.subarray(0, n);
      meter.take(got);
      chunks.push(got);
      total += n;
    }
    return joinChunks(chunks, total);
  } finally {
    file.close();
  }
}
