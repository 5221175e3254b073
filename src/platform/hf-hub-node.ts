/**
 * `--target ORG/NAME[@REV]` in Node: the model's folder in the Hugging Face cache, downloaded into that
 * cache first when it is not there (src/formats/hf-hub-cache.ts has the layout and the rules). A
 * caller that reads only the config (`speclab plan`) asks for config.json alone: a cached snapshot
 * with it will do, and a download fetches that one file into the same layout.
 *
 * The Hub's API (the revision's commit, the file list, errors by status) goes through `@huggingface/hub`
 * (modelInfo, listFiles, HubApiError). Its own download (snapshotDownload) neither resumes a cut file
 * nor reports bytes, so the files are fetched here, into the same layout huggingface_hub writes:
 * `blobs/<etag>.incomplete`, appended with a Range request after a kill, checked against the listed
 * size, renamed to `blobs/<etag>`, and linked from `snapshots/<commit>/<path>`; `refs/<REV>` records
 * the commit. transformers, SGLang and vLLM then find the same copy, and SpecLab finds theirs.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { HubApiError, listFiles, modelInfo, type ListFileEntry } from '@huggingface/hub';
import {
  cachedSnapshot,
  downloadOrder,
  hubCacheDir,
  hubOffline,
  hubToken,
  missingWeightFiles,
  parseHubModelId,
  repoFolderName,
  wantedHubFile,
  type HubEnv,
  type HubModelId,
} from '../formats/hf-hub-cache.ts';
import type { ProgressDisplay } from '../ports/progress.ts';
import { LockHeldError, lockOwnerText, type FileLock, type FileStore } from '../ports/storage.ts';
import type { ResolveModelOptions } from '../training/run/platform.ts';

/** The Hub: HF_ENDPOINT when set (a mirror, or a test's local server), else huggingface.co. */
const hubUrlOf = (env: HubEnv) => (env('HF_ENDPOINT') || 'https://huggingface.co').replace(/\/+$/, '');

const wanted = (entry: ListFileEntry): boolean => wantedHubFile(entry);

const configFile = (entry: ListFileEntry): boolean => entry.type === 'file' && entry.path === 'config.json';

/**
 * The local folder of `spec` when it is a Hub model id (undefined otherwise): the cached snapshot
 * when complete (with `configOnly`, when it has config.json), else the download of it (refused under
 * HF_HUB_OFFLINE). Errors are one line naming the id and what to do.
 */
export async function resolveHubModel(
  spec: string,
  env: HubEnv,
  files: (root: string) => FileStore,
  progress: ProgressDisplay,
  options: ResolveModelOptions = {},
): Promise<string | undefined> {
  const id = parseHubModelId(spec);
  if (!id) return undefined;
  const configOnly = options.configOnly === true;
  const flag = options.flag ?? '--target';
  const cacheRoot = path.resolve(hubCacheDir(env));
  const cached = await cachedSnapshot(files(cacheRoot), id);
  if (cached) {
    const missing = configOnly ? [] : await missingWeightFiles(files(`${cacheRoot}/${cached}`));
    if (missing.length === 0) {
      progress.log(`target ${spec}: the Hugging Face cache's ${cacheRoot}/${cached}`);
      return `${cacheRoot}/${cached}`;
    }
  }
  const where = `${cacheRoot}/${repoFolderName(id.repo)}`;
  if (hubOffline(env))
    throw new Error(
      configOnly
        ? `${flag} ${spec}: no config.json in the Hugging Face cache (${where}) and HF_HUB_OFFLINE is set; download it with network, or unset HF_HUB_OFFLINE`
        : `${flag} ${spec}: not complete in the Hugging Face cache (${where}) and HF_HUB_OFFLINE is set; download it with network, or unset HF_HUB_OFFLINE`,
    );
  const token = await hubToken(env, readIfPresent);
  try {
    const snapshot = await downloadSnapshot(
      id,
      files(cacheRoot),
      cacheRoot,
      hubUrlOf(env),
      token,
      progress,
      configOnly ? configFile : wanted,
    );
    if (configOnly) return snapshot;
    const missing = await missingWeightFiles(files(snapshot));
    if (missing.length > 0)
      throw new Error(
        `${id.repo}@${id.revision} has no safetensors weights SpecLab can load (missing ${missing.join(', ')}); .bin-only models are not read`,
      );
    return snapshot;
  } catch (err) {
    throw new Error(`${flag} ${spec}: ${hubErrorLine(err, hubUrlOf(env), id, token !== undefined)}`, { cause: err });
  }
}

async function readIfPresent(file: string): Promise<Uint8Array | undefined> {
  try {
    return await fs.readFile(file);
  } catch {
    return undefined;
  }
}

/** One line for a failed download: gated or private, missing, or the network. */
function hubErrorLine(err: unknown, hubUrl: string, id: HubModelId, hasToken: boolean): string {
  if (err instanceof HubApiError) {
    if (err.statusCode === 401 || err.statusCode === 403)
      return hasToken
        ? `the Hub refused the token (${err.statusCode}): the token may be expired or lack read access, or the model gated (accept its terms on ${hubUrl}/${id.repo}) or missing`
        : `the Hub answered ${err.statusCode}: no such model, or a gated or private one that needs a token (set HF_TOKEN, or log in with \`hf auth login\`)`;
    if (err.statusCode === 404)
      return err.url.includes('/resolve/')
        ? `a listed file is missing on ${hubUrl} (404: ${err.url})`
        : `no model ${id.repo} at revision ${id.revision} on ${hubUrl} (404)`;
    return `the Hub answered ${err.statusCode} (${err.message})`;
  }
  return (err as Error).message;
}

/** Downloads the files of `id` that `want` takes into the cache, resuming any cut file; returns the snapshot folder. */
async function downloadSnapshot(
  id: HubModelId,
  cache: FileStore,
  cacheRoot: string,
  hubUrl: string,
  token: string | undefined,
  progress: ProgressDisplay,
  want: (entry: ListFileEntry) => boolean,
): Promise<string> {
  const credentials = token ? { accessToken: token as `hf_${string}` } : {};
  const info = await modelInfo({ name: id.repo, revision: id.revision, additionalFields: ['sha'], hubUrl, ...credentials });
  const commit = info.sha;
  if (!/^[0-9a-f]{40}$/.test(commit ?? '')) throw new Error(`the Hub gave no commit for ${id.repo}@${id.revision}`);
  const files: ListFileEntry[] = [];
  for await (const entry of listFiles({ repo: id.repo, revision: commit, recursive: false, hubUrl, ...credentials }))
    if (want(entry)) files.push(entry);
  if (!files.some((f) => f.path === 'config.json')) throw new Error(`${id.repo}@${id.revision} has no config.json: not a model folder`);
  // Weights last: a download cut before them leaves a snapshot the cache check does not take as complete.
  files.splice(0, files.length, ...downloadOrder(files));
  const repoDir = path.join(cacheRoot, repoFolderName(id.repo));
  const snapshot = path.join(repoDir, 'snapshots', commit);
  await fs.mkdir(path.join(repoDir, 'blobs'), { recursive: true });
  await fs.mkdir(snapshot, { recursive: true });
  if (commit !== id.revision) {
    await fs.mkdir(path.join(repoDir, 'refs', path.dirname(id.revision)), { recursive: true });
    await fs.writeFile(path.join(repoDir, 'refs', id.revision), commit);
  }
  const total = files.reduce((a, f) => a + (f.lfs?.size ?? f.size), 0);
  const what = files.length === 1 ? `${id.repo} ${files[0].path}` : id.repo;
  const bar = progress.start({ label: `downloading ${what}`, total, unit: 'bytes' });
  let done = 0;
  for (const file of files) {
    const size = file.lfs?.size ?? file.size;
    const etag = file.lfs?.oid ?? file.oid;
    if (!etag) throw new Error(`${file.path}: the Hub listed no object id`);
    const blob = path.join(repoDir, 'blobs', etag);
    if (!(await exists(blob))) {
      const url = `${hubUrl}/${id.repo}/resolve/${commit}/${file.path.split('/').map(encodeURIComponent).join('/')}`;
      const lock = `.locks/${repoFolderName(id.repo)}/${etag}.speclab.lock`;
      await underBlobLock(
        () => cache.lockExclusive!(lock),
        `${cacheRoot}/${lock}`,
        blob,
        `${id.repo} ${file.path}`,
        progress,
        () => fetchToBlob(url, blob, size, token, (n) => bar.update(done + n)),
      );
    }
    done += size;
    bar.update(done);
    const link = path.join(snapshot, file.path);
    await fs.rm(link, { force: true });
    await fs.symlink(path.relative(path.dirname(link), blob), link);
  }
  bar.end(`${id.repo}@${commit.slice(0, 12)}: ${files.length} files in ${snapshot}`);
  return snapshot;
}

/** A download that has not grown its file in this long, while another process holds its lock, is taken as stuck. */
const STUCK_MS = 5 * 60_000;

/**
 * Runs `download` holding the blob's lock (`<cache>/.locks/models--ORG--NAME/<etag>.speclab.lock`), so two
 * SpecLab processes never append to one `.incomplete` file; a process that finds it held waits, saying
 * so, and skips the download when the other finished it. A lock held while the partial file has not grown
 * for STUCK_MS is refused naming the lock file. (huggingface_hub locks `<etag>.lock` with flock, which
 * Node lacks: a concurrent Python download of the same blob is not excluded.)
 */
async function underBlobLock(
  lock: () => Promise<FileLock>,
  lockPath: string,
  blob: string,
  what: string,
  progress: ProgressDisplay,
  download: () => Promise<void>,
): Promise<void> {
  let told = false;
  let seen = -1;
  let since = Date.now();
  for (;;) {
    let held: FileLock;
    try {
      held = await lock();
    } catch (err) {
      if (!(err instanceof LockHeldError)) throw err;
      if (await exists(blob)) return;
      if (!told) progress.log(`${what}: ${lockOwnerText(err.owner)} is downloading it into the same cache; waiting`);
      told = true;
      const size = await fs.stat(`${blob}.incomplete`).then(
        (s) => s.size,
        () => -1,
      );
      if (size !== seen) [seen, since] = [size, Date.now()];
      if (Date.now() - since > STUCK_MS)
        throw new Error(
          `${what}: ${lockOwnerText(err.owner)} holds ${lockPath} and its download has not grown in ${STUCK_MS / 60_000} minutes; delete the lock file if that process is gone`,
          { cause: err },
        );
      await new Promise((resolve) => setTimeout(resolve, 250));
      continue;
    }
    try {
      if (!(await exists(blob))) await download();
    } finally {
      await held.release();
    }
    return;
  }
}

async function exists(file: string): Promise<boolean> {
  return fs.stat(file).then(
    () => true,
    () => false,
  );
}

/**
 * GET `url` into `blob` through `blob.incomplete`: what a killed download left is kept and the rest
 * asked for with a Range header (a server that answers the whole file restarts it). The file must end
 * at the listed `size`, or it stays incomplete and the error says so.
 */
async function fetchToBlob(
  url: string,
  blob: string,
  size: number,
  token: string | undefined,
  onBytes: (n: number) => void,
): Promise<void> {
  const partial = `${blob}.incomplete`;
  const have = await fs.stat(partial).then(
    (s) => s.size,
    () => 0,
  );
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  if (have > 0 && have < size) headers.range = `bytes=${have}-`;
  const response = await fetch(url, { headers });
  if (!response.ok || !response.body) {
    const status = response.status;
    throw new HubApiError(url, status, response.headers.get('x-request-id') ?? undefined, `GET ${url}: ${status} ${response.statusText}`);
  }
  const resumed = response.status === 206 && have > 0 && have < size;
  if (resumed && !new RegExp(`^bytes ${have}-`).test(response.headers.get('content-range') ?? '')) {
    // A server that resumed elsewhere: the kept bytes cannot be trusted to join; start again next run.
    await fs.rm(partial, { force: true });
    throw new Error(
      `${url}: asked for bytes ${have}- and got ${response.headers.get('content-range') ?? 'no Content-Range'}; the partial file is removed, rerun to download again`,
    );
  }
  const out = await fs.open(partial, resumed ? 'a' : 'w');
  let written = resumed ? have : 0;
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      await out.write(chunk);
      written += chunk.byteLength;
      onBytes(written);
    }
    await out.sync();
  } catch (err) {
    throw new Error(`${url}: cut at ${written} of ${size} bytes (${(err as Error).message}); rerun to resume from ${partial}`, {
      cause: err,
    });
  } finally {
    await out.close();
  }
  if (written !== size) throw new Error(`${url}: got ${written} of ${size} bytes; rerun to resume from ${partial}`);
  await fs.rename(partial, blob);
}
