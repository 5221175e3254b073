/**
 * Browser platform: `navigator.gpu`, and an IndexedDB-backed FileStore (through `idb`).
 * Each FileStore root is one IndexedDB database with one object store of path → bytes; a write is
 * one transaction, so it is atomic the way a temp-file rename is on disk.
 */
import { openDB, type IDBPDatabase } from 'idb';
import { GpuContext, openGpuContext, type GpuRequest } from '../gpu/context.ts';
import type { AppendLog, FileStore, Platform } from './platform.ts';

const live = new Set<GpuContext>();
const FILES = 'files';

class IndexedDbFileStore implements FileStore {
  private db: Promise<IDBPDatabase> | undefined;
  constructor(readonly root: string) {}
  private open(): Promise<IDBPDatabase> {
    this.db ??= openDB(`speclab-files:${this.root}`, 1, {
      upgrade(db) {
        db.createObjectStore(FILES);
      },
    });
    return this.db;
  }
  async read(path: string): Promise<Uint8Array> {
    const value = await (await this.open()).get(FILES, path);
    if (!(value instanceof Uint8Array)) throw new Error(`${this.root}/${path}: no such file in IndexedDB`);
    return value;
  }
  async readRange(path: string, offset: number, length: number): Promise<Uint8Array> {
    const all = await this.read(path);
    if (offset + length > all.length) {
      throw new Error(`${this.root}/${path}: wanted ${length} bytes at offset ${offset}, file has ${all.length}`);
    }
    return all.slice(offset, offset + length);
  }
  async size(path: string): Promise<number> {
    return (await this.read(path)).length;
  }
  async writeAtomic(path: string, bytes: Uint8Array): Promise<void> {
    await (await this.open()).put(FILES, bytes.slice(), path);
  }
  async exists(path: string): Promise<boolean> {
    return (await (await this.open()).getKey(FILES, path)) !== undefined;
  }
  async list(dir: string): Promise<string[]> {
    const prefix = dir === '' ? '' : `${dir.replace(/\/$/, '')}/`;
    const names = new Set<string>();
    for (const key of await (await this.open()).getAllKeys(FILES)) {
      const k = String(key);
      if (k.startsWith(prefix)) names.add(k.slice(prefix.length).split('/')[0]);
    }
    return [...names].sort();
  }
  async remove(path: string): Promise<void> {
    const db = await this.open();
    const tx = db.transaction(FILES, 'readwrite');
    for (const key of await tx.store.getAllKeys()) {
      const k = String(key);
      if (k === path || k.startsWith(`${path}/`)) await tx.store.delete(key);
    }
    await tx.done;
  }
  async openAppendLog(path: string): Promise<AppendLog> {
    throw new Error(
      `${this.root}/${path}: append-only logs need a file system with fsync; IndexedDB has neither, so in the browser use the IndexedDB metadata store instead of the file-journal one`,
    );
  }
}

export const browserPlatform: Platform = {
  name: 'browser',
  async acquireGpu(request: GpuRequest = {}) {
    const gpu = typeof navigator === 'undefined' ? undefined : navigator.gpu;
    const ctx = await openGpuContext({
      runtime: 'browser',
      gpu,
      keepAlive: gpu,
      request,
      onDestroy: (c) => live.delete(c),
    });
    live.add(ctx);
    return ctx;
  },
  files: (root) => new IndexedDbFileStore(root),
  env: (name) => new URLSearchParams(globalThis.location?.search ?? '').get(name) ?? undefined,
  args: () => [],
  async exit(): Promise<never> {
    for (const ctx of [...live]) ctx.destroy();
    return new Promise<never>(() => {});
  },
};
