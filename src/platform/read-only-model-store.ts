/**
 * What the read-only model stores of the browser (browser-model-files.ts: picked and dropped files;
 * browser-model-url.ts: a directory over HTTP) share: the path rule (a path cannot leave the model
 * directory) and the write side, where every write is refused naming the path, since these stores
 * describe someone else's files. Kept in one file so both stores refuse the same things in the same
 * words.
 */
import type { AppendLog, FileStore } from '../ports/storage.ts';
import type { ReadBudget } from '../ports/read-budget.ts';

/** Splits a relative path into segments, refusing ".." so a path cannot leave the directory. */
export function segments(path: string, where: string): string[] {
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new Error(`${where}: path "${path}" leaves the model directory ("..")`);
  return parts;
}

function readOnly(root: string, path: string, operation: string): Promise<never> {
  return Promise.reject(new Error(`${root}/${path}: cannot ${operation}: ${root} is a read-only store of model files`));
}

/** The write side shared by the picked-files and URL stores: every write is refused, naming the path. */
export abstract class ReadOnlyModelStore implements FileStore {
  abstract readonly root: string;
  abstract read(path: string, budget?: ReadBudget): Promise<Uint8Array>;
  abstract readRange(path: string, offset: number, length: number): Promise<Uint8Array>;
  abstract size(path: string): Promise<number>;
  abstract exists(path: string): Promise<boolean>;
  abstract list(dir: string): Promise<string[]>;

  writeAtomic(path: string): Promise<void> {
    return readOnly(this.root, path, 'write');
  }
  writeAtomicChunks(path: string): Promise<number> {
    return readOnly(this.root, path, 'write');
  }
  remove(path: string): Promise<void> {
    return readOnly(this.root, path, 'remove');
  }
  openAppendLog(path: string): Promise<AppendLog> {
    return readOnly(this.root, path, 'append');
  }
}

/** A byte range a caller may ask for: safe non-negative integers. */
export function checkRange(where: string, offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
    throw new Error(`${where}: invalid byte range (offset ${offset}, length ${length})`);
  }
}
