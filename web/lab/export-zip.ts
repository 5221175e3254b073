/**
 * The draft export as one zip (@zip.js/zip.js): config.json and model.safetensors, as SGLang loads
 * them from a directory. Import takes that zip (its entries, by base name) or the loose files.
 * Compression runs on the page's thread: the files are a few MiB, and no extra worker script is needed.
 */
import { BlobReader, BlobWriter, configure, Uint8ArrayReader, Uint8ArrayWriter, ZipReader, ZipWriter } from '@zip.js/zip.js';

configure({ useWebWorkers: false });

export interface ZipEntrySummary {
  name: string;
  bytes: number;
}

/** The zip of `files` and what is inside it. */
export async function makeExportZip(
  files: readonly { name: string; bytes: Uint8Array }[],
): Promise<{ blob: Blob; entries: ZipEntrySummary[] }> {
  const writer = new ZipWriter(new BlobWriter('application/zip'));
  for (const f of files) await writer.add(f.name, new Uint8ArrayReader(f.bytes));
  const blob = await writer.close();
  return { blob, entries: files.map((f) => ({ name: f.name, bytes: f.bytes.byteLength })) };
}

/** `picked` with every .zip replaced by its file entries (named by their base name); fails naming a bad zip. */
export async function expandZips(picked: readonly File[]): Promise<File[]> {
  const out: File[] = [];
  for (const file of picked) {
    if (!file.name.toLowerCase().endsWith('.zip')) {
      out.push(file);
      continue;
    }
    const reader = new ZipReader(new BlobReader(file));
    try {
      const entries = await reader.getEntries();
      for (const entry of entries) {
        if (entry.directory) continue;
        const bytes = await entry.getData(new Uint8ArrayWriter());
        out.push(new File([bytes], entry.filename.split('/').pop() ?? entry.filename));
      }
    } catch (err) {
      throw new Error(`${file.name}: not a readable zip (${(err as Error).message})`, { cause: err });
    } finally {
      await reader.close();
    }
    if (out.length === 0) throw new Error(`${file.name}: the zip holds no files`);
  }
  return out;
}
