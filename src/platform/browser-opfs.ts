/**
 * The origin-private file system (OPFS) as a FileStore, for files too large for one IndexedDB value:
 * a model downloaded from the Hub in the lab (./browser-hub.ts). Reads slice the File, so a weight
 * stream reads one slice at a time; appends (a resumed download) go through a sync access handle,
 * which only a worker has. `root` and paths use `/`; folders are made on write.
 */
import type { AppendLog, FileStore } from '../ports/storage.ts';
import { checkSizeWithinBudget, withinBudget, type ReadBudget } from '../ports/read-budget.ts';

async function opfsRoot(): Promise<FileSystemDirectoryHandle> {
  if (typeof navigator === 'undefined' || !navigator.storage?.getDirectory)
    throw new Error('this browser has no origin-private file system (navigator.storage.getDirectory)');
  return navigator.storage.getDirectory();
}

/** A worker's synchronous file access (declared here: not every runtime's DOM types have it). */
interface SyncAccessFileHandle {
  createSyncAccessHandle(): Promise<{
    getSize(): number;
    write(buffer: Uint8Array, options: { at: number }): number;
    flush(): void;
    close(): void;
  }>;
}

const parts = (path: string) => path.split('/').filter((p) => p !== '' && p !== '.');

/** The folder at `path` under the OPFS root; undefined when absent and `create` is false. */
export async function opfsDirectory(path: string, create: boolean): Promise<FileSystemDirectoryHandle | undefined> {
  let dir = await opfsRoot();
  for (const name of parts(path)) {
    try {
      dir = await dir.getDirectoryHandle(name, { create });
    } catch (err) {
      if ((err as DOMException).name === 'NotFoundError' || (err as DOMException).name === 'TypeMismatchError') return undefined;
      throw err;
    }
  }
  return dir;
}

export class OpfsFileStore implements FileStore {
  constructor(readonly root: string) {}

  private async handle(path: string, create = false): Promise<FileSystemFileHandle | undefined> {
    const segments = parts(path);
    const name = segments.pop();
    if (!name) return undefined;
    const dir = await opfsDirectory([this.root, ...segments].join('/'), create);
    if (!dir) return undefined;
    try {
      return await dir.getFileHandle(name, { create });
    } catch (err) {
      if ((err as DOMException).name === 'NotFoundError' || (err as DOMException).name === 'TypeMismatchError') return undefined;
      throw err;
    }
  }

  private async file(path: string): Promise<File> {
    const handle = await this.handle(path);
    if (!handle) throw new Error(`${this.root}/${path}: no such file in the origin-private file system`);
    return handle.getFile();
  }

  async read(path: string, budget?: ReadBudget): Promise<Uint8Array> {
    const file = await this.file(path);
    checkSizeWithinBudget(`${this.root}/${path}`, file.size, budget);
    return withinBudget(`${this.root}/${path}`, new Uint8Array(await file.arrayBuffer()), budget);
  }

  async readRange(path: string, offset: number, length: number): Promise<Uint8Array> {
    const file = await this.file(path);
    if (offset + length > file.size)
      throw new Error(`${this.root}/${path}: wanted ${length} bytes at offset ${offset}, file has ${file.size}`);
    return new Uint8Array(await file.slice(offset, offset + length).arrayBuffer());
  }

  async size(path: string): Promise<number> {
    return (await this.file(path)).size;
  }

  async writeAtomic(path: string, bytes: Uint8Array): Promise<void> {
    const writable = await (await this.handle(path, true))!.createWritable();
    await writable.write(bytes.slice());
    // close() commits the whole file at once: a reader never sees half of it.
    await writable.close();
  }

  async writeAtomicChunks(path: string, chunks: AsyncIterable<Uint8Array>): Promise<number> {
    const writable = await (await this.handle(path, true))!.createWritable();
    let n = 0;
    for await (const chunk of chunks) {
      await writable.write(chunk.slice());
      n += chunk.byteLength;
    }
    await writable.close();
    return n;
  }

  /**
   * Appends `chunks` to `path` (made when absent), flushing as it goes, so bytes written before a cut
   * stay for a resumed download; returns the file's size after.
   */
  async append(path: string, chunks: AsyncIterable<Uint8Array>, onSize: (size: number) => void): Promise<number> {
    const handle = (await this.handle(path, true))!;
    const access = await (handle as unknown as SyncAccessFileHandle).createSyncAccessHandle();
    try {
      let at = access.getSize();
      for await (const chunk of chunks) {
        at += access.write(chunk, { at });
        access.flush();
        onSize(at);
      }
      return at;
    } finally {
      access.close();
    }
  }

  /** Renames a file within its folder (a finished download loses its `.incomplete`). */
  async rename(path: string, newName: string): Promise<void> {
    const handle = await this.handle(path);
    if (!handle) throw new Error(`${this.root}/${path}: no such file to rename`);
    await (handle as FileSystemFileHandle & { move(name: string): Promise<void> }).move(newName);
  }

  async exists(path: string): Promise<boolean> {
    return (await this.handle(path)) !== undefined;
  }

  async list(dir: string): Promise<string[]> {
    const folder = await opfsDirectory([this.root, ...parts(dir)].join('/'), false);
    if (!folder) return [];
    const names: string[] = [];
    for await (const name of (folder as FileSystemDirectoryHandle & { keys(): AsyncIterable<string> }).keys()) names.push(name);
    return names.sort();
  }

  async remove(path: string): Promise<void> {
    const segments = parts(path);
    const name = segments.pop();
    const dir = name ? await opfsDirectory([this.root, ...segments].join('/'), false) : undefined;
    if (!dir || !name) return;
    await dir.removeEntry(name, { recursive: true }).catch((err: DOMException) => {
      if (err.name !== 'NotFoundError') throw err;
    });
  }

  openAppendLog(path: string): Promise<AppendLog> {
    return Promise.reject(new Error(`${this.root}/${path}: the lab keeps its journal in IndexedDB, not in the origin-private file system`));
  }
}
