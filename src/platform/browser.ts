/**
 * Browser platform: `navigator.gpu`, an IndexedDB-backed FileStore and IndexedDB key-value
 * databases (both through `idb`).
 * Each FileStore root is one IndexedDB database with one object store of path → bytes; a write is
 * one transaction, so it is atomic the way a temp-file rename is on disk.
 * `openKeyValueDatabase` hands out whole IndexedDB transactions (readwrite ones with strict
 * durability, aborted when their body fails); the durable metadata store is built on it.
 */
import { deleteDB, openDB, type IDBPDatabase, type IDBPTransaction } from 'idb';
import { environmentGpuRequest, GpuContext, openGpuContext, type GpuRequest } from '../gpu/context.ts';
import type { AppendLog, FileStore, KeyValueDatabase, KeyValueKey, KeyValueSchema, KeyValueTransaction } from '../ports/storage.ts';
import type { Platform } from '../cli/platform.ts';
import { withinBudget, type ReadBudget } from '../ports/read-budget.ts';

// The read-only model stores (picked or dropped files, a base URL), for the page to import from here.
export {
  droppedDirectory,
  droppedFilesStore,
  pickedDirectory,
  pickedFilesStore,
  type PickedDirectory,
  type PickedFile,
  type PickedFilesOptions,
} from './browser-model-files.ts';
export { urlStore, type UrlFetchProgress, type UrlStoreOptions } from './browser-model-url.ts';

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
  async read(path: string, budget?: ReadBudget): Promise<Uint8Array> {
    const value = await (await this.open()).get(FILES, path);
    if (!(value instanceof Uint8Array)) throw new Error(`${this.root}/${path}: no such file in IndexedDB`);
    return withinBudget(`${this.root}/${path}`, value, budget);
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
  /** IndexedDB stores a value whole: the chunks are joined, then put in one transaction. */
  async writeAtomicChunks(path: string, chunks: AsyncIterable<Uint8Array>): Promise<number> {
    const parts: Uint8Array[] = [];
    for await (const chunk of chunks) parts.push(chunk.slice());
    const bytes = new Uint8Array(parts.reduce((a, c) => a + c.byteLength, 0));
    let at = 0;
    for (const c of parts) {
      bytes.set(c, at);
      at += c.byteLength;
    }
    await (await this.open()).put(FILES, bytes, path);
    return bytes.byteLength;
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

type AnyTransaction = IDBPTransaction<unknown, string[], 'readwrite'>;

/** The KeyValueTransaction view of one idb transaction. */
function keyValueTransaction(tx: AnyTransaction): KeyValueTransaction {
  return {
    get: (store, key) => tx.objectStore(store).get(key),
    getAll: (store) => tx.objectStore(store).getAll(),
    getAllKeys: async (store) => (await tx.objectStore(store).getAllKeys()) as KeyValueKey[],
    count: (store) => tx.objectStore(store).count(),
    getByIndex: (store, index, value) => tx.objectStore(store).index(index).get(value),
    getKeyByIndex: async (store, index, value) => (await tx.objectStore(store).index(index).getKey(value)) as KeyValueKey | undefined,
    put: async (store, value, key) => (await tx.objectStore(store).put(value, key)) as KeyValueKey,
  };
}

class IndexedDbKeyValueDatabase implements KeyValueDatabase {
  constructor(
    readonly name: string,
    private readonly db: IDBPDatabase,
  ) {}

  async transaction<T>(
    stores: readonly string[],
    mode: 'readonly' | 'readwrite',
    body: (tx: KeyValueTransaction) => Promise<T>,
  ): Promise<T> {
    // Strict durability: the commit event fires only after the data is flushed to disk.
    const tx = this.db.transaction([...stores], mode, mode === 'readwrite' ? { durability: 'strict' } : {}) as unknown as AnyTransaction;
    const done = tx.done;
    done.catch(() => {}); // observed below, or superseded by the body's error
    let result: T;
    try {
      result = await body(keyValueTransaction(tx));
    } catch (err) {
      try {
        tx.abort();
      } catch {
        // Already aborted by the failed request (or finished): nothing more to undo.
      }
      throw err;
    }
    await done;
    return result;
  }

  close(): void {
    this.db.close();
  }
}

async function openKeyValueDatabase(name: string, schema: KeyValueSchema): Promise<KeyValueDatabase> {
  const db = await openDB(name, schema.version, {
    upgrade(database, _oldVersion, _newVersion, tx) {
      for (const spec of schema.stores) {
        const store = database.objectStoreNames.contains(spec.name)
          ? tx.objectStore(spec.name)
          : database.createObjectStore(spec.name, { autoIncrement: spec.autoIncrement ?? false });
        for (const index of spec.indexes ?? []) {
          if (!store.indexNames.contains(index.name)) store.createIndex(index.name, index.keyPath, { unique: index.unique });
        }
      }
    },
    // Another connection (tab) wants to upgrade or delete the database: step aside rather than
    // block it forever. Later transactions on this connection fail with a clear DOM error.
    blocking() {
      db.close();
    },
  });
  return new IndexedDbKeyValueDatabase(name, db);
}

export const browserPlatform: Platform = {
  name: 'browser',
  async acquireGpu(request: GpuRequest = {}) {
    const gpu = typeof navigator === 'undefined' ? undefined : navigator.gpu;
    const ctx = await openGpuContext({
      runtime: 'browser',
      gpu,
      keepAlive: gpu,
      // ?SPECLAB_DEFAULT_LIMITS=1 or ?SPECLAB_FEATURE_LEVEL=compatibility in the page's address
      // (a worker gets them from its page: GpuRequest fields win over its own address).
      request: environmentGpuRequest(request, (name) => browserPlatform.env(name)),
      onDestroy: (c) => live.delete(c),
    });
    live.add(ctx);
    return ctx;
  },
  files: (root) => new IndexedDbFileStore(root),
  openKeyValueDatabase,
  deleteKeyValueDatabase: (name) => deleteDB(name),
  env: (name) => new URLSearchParams(globalThis.location?.search ?? '').get(name) ?? undefined,
  args: () => [],
  async exit(): Promise<never> {
    for (const ctx of [...live]) ctx.destroy();
    return new Promise<never>(() => {});
  },
};
