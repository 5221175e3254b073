/**
 * Read-only FileStores over a Hugging Face model directory that the browser did not write itself:
 * files the user picked (`<input type=file multiple webkitdirectory>`) or dropped. A directory served
 * over HTTP is browser-model-url.ts; both share the path rule and the refused writes
 * (read-only-model-store.ts).
 *
 * Both plug into the ordinary loaders (`HfCheckpointSource`, `ChatTokenizer.load`), which read through
 * `FileStore` tensor by tensor with `readRange`: a picked file is sliced (`File.slice`), so the store
 * never holds a whole multi-gigabyte safetensors file.
 *
 * Writes are refused: these stores describe someone else's files. `list` works for picked files.
 */
import type { FileStore } from '../ports/storage.ts';
import { checkSizeWithinBudget, withinBudget, type ReadBudget } from '../ports/read-budget.ts';
import { ReadOnlyModelStore, checkRange, segments } from './read-only-model-store.ts';

/** A picked file and its slash-separated path inside the picked directory. */
export interface PickedFile {
  readonly file: File;
  readonly path: string;
}

export interface PickedFilesOptions {
  /** The store's `root`, shown in messages; default: the picked folder's name, else "picked files". */
  readonly label?: string;
}

/**
 * Where a picked File lives inside the picked directory: `webkitRelativePath` without its first
 * segment (the folder the user chose, whose name becomes the store label), else the bare name.
 */
function pickedPath(file: File): { path: string; folder?: string } {
  const relative = file.webkitRelativePath ?? '';
  if (relative === '') return { path: file.name };
  const [folder, ...rest] = relative.split('/');
  return rest.length === 0 ? { path: relative } : { path: rest.join('/'), folder };
}

class PickedFilesStore extends ReadOnlyModelStore {
  readonly root: string;
  private readonly byPath = new Map<string, File>();

  constructor(entries: readonly PickedFile[], label: string) {
    super();
    this.root = label;
    for (const { file, path } of entries) {
      const key = segments(path, label).join('/');
      if (key === '') throw new Error(`${label}: picked file "${file.name}" has an empty path`);
      if (this.byPath.has(key)) throw new Error(`${label}: two picked files have the path "${key}"`);
      this.byPath.set(key, file);
    }
  }

  private file(path: string): File {
    const file = this.byPath.get(segments(path, this.root).join('/'));
    if (file) return file;
    const picked = [...this.byPath.keys()].sort();
    const shown = picked.length > 12 ? `${picked.slice(0, 12).join(', ')}, … (${picked.length} files)` : picked.join(', ') || 'none';
    throw new Error(`${this.root}/${path}: not among the picked files (picked: ${shown})`);
  }

  async read(path: string, budget?: ReadBudget): Promise<Uint8Array> {
    const file = this.file(path);
    checkSizeWithinBudget(`${this.root}/${path}`, file.size, budget);
    return withinBudget(`${this.root}/${path}`, new Uint8Array(await file.arrayBuffer()), budget);
  }

  async readRange(path: string, offset: number, length: number): Promise<Uint8Array> {
    const file = this.file(path);
    checkRange(`${this.root}/${path}`, offset, length);
    if (offset + length > file.size) {
      throw new Error(`${this.root}/${path}: wanted ${length} bytes at offset ${offset}, file has ${file.size}`);
    }
    return new Uint8Array(await file.slice(offset, offset + length).arrayBuffer());
  }

  async size(path: string): Promise<number> {
    return this.file(path).size;
  }

  async exists(path: string): Promise<boolean> {
    return this.byPath.has(segments(path, this.root).join('/'));
  }

  async list(dir: string): Promise<string[]> {
    const prefix = segments(dir, this.root).join('/');
    const names = new Set<string>();
    for (const key of this.byPath.keys()) {
      if (prefix === '') names.add(key.split('/')[0]);
      else if (key.startsWith(`${prefix}/`)) names.add(key.slice(prefix.length + 1).split('/')[0]);
    }
    return [...names].sort();
  }
}

function isPickedFile(x: File | PickedFile): x is PickedFile {
  return !(x instanceof File);
}

/**
 * Picked files with explicit paths and the name of the folder they came from: plain data that a
 * page can post to a worker (a File survives postMessage; a FileStore does not), where
 * `pickedFilesStore(files, { label: folder })` makes the store.
 */
export interface PickedDirectory {
  readonly files: readonly PickedFile[];
  /** The chosen or dropped folder (stripped from the paths), when there was exactly one. */
  readonly folder?: string;
}

/**
 * Paths for picked files: a FileList from `<input type=file multiple webkitdirectory>` gets them
 * from `webkitRelativePath` with the chosen folder stripped; plain Files get their names;
 * `{ file, path }` pairs keep theirs.
 */
export function pickedDirectory(files: FileList | Iterable<File | PickedFile>): PickedDirectory {
  const entries: PickedFile[] = [];
  const folders = new Set<string>();
  for (const item of Array.from(files as Iterable<File | PickedFile>)) {
    if (isPickedFile(item)) {
      entries.push(item);
      continue;
    }
    const { path, folder } = pickedPath(item);
    if (folder !== undefined) folders.add(folder);
    entries.push({ file: item, path });
  }
  return { files: entries, folder: folders.size === 1 ? [...folders][0] : undefined };
}

/** A read-only FileStore over picked files, with paths as `pickedDirectory` gives them. */
export function pickedFilesStore(files: FileList | Iterable<File | PickedFile>, options: PickedFilesOptions = {}): FileStore {
  const dir = pickedDirectory(files);
  return new PickedFilesStore(dir.files, options.label ?? dir.folder ?? 'picked files');
}

/** `FileSystemEntry` walking: a dropped folder arrives as entries, read in batches. */
async function readDirectory(dir: FileSystemDirectoryEntry): Promise<FileSystemEntry[]> {
  const reader = dir.createReader();
  const all: FileSystemEntry[] = [];
  for (;;) {
    // readEntries hands out at most ~100 entries per call; an empty batch means the end.
    const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
    if (batch.length === 0) return all;
    all.push(...batch);
  }
}

async function walk(entry: FileSystemEntry, path: string, out: PickedFile[]): Promise<void> {
  if (entry.isFile) {
    const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
    out.push({ file, path });
  } else if (entry.isDirectory) {
    for (const child of await readDirectory(entry as FileSystemDirectoryEntry)) await walk(child, `${path}/${child.name}`, out);
  }
}

/**
 * What was dropped on the page, as picked files. Call it synchronously inside the `drop` handler
 * (before any `await`): the browser empties `dataTransfer` when the handler returns, so the items
 * are captured first and walked afterwards. A single dropped folder becomes the root (and the
 * `folder`), like a picked folder; dropped loose files are found by their names.
 */
export function droppedDirectory(dataTransfer: DataTransfer): Promise<PickedDirectory> {
  const captured = Array.from(dataTransfer.items)
    .filter((item) => item.kind === 'file')
    .map((item) => ({ entry: item.webkitGetAsEntry?.() ?? null, file: item.getAsFile() }));
  return (async () => {
    const top = captured.length === 1 && captured[0].entry?.isDirectory ? captured[0].entry : undefined;
    const files: PickedFile[] = [];
    if (top) {
      for (const child of await readDirectory(top as FileSystemDirectoryEntry)) await walk(child, child.name, files);
      return { files, folder: top.name };
    }
    for (const { entry, file } of captured) {
      // Script-made DataTransfers (and some browsers) give no entry: use the File and its name.
      if (entry) await walk(entry, entry.name, files);
      else if (file) files.push({ file, path: file.name });
    }
    return { files };
  })();
}

/** A read-only FileStore over what was dropped; the same synchronous-call rule as `droppedDirectory`. */
export async function droppedFilesStore(dataTransfer: DataTransfer, options: PickedFilesOptions = {}): Promise<FileStore> {
  const dir = await droppedDirectory(dataTransfer);
  return pickedFilesStore(dir.files, { label: options.label ?? dir.folder });
}
