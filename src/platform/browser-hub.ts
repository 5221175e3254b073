/**
 * Hugging Face ids in the browser lab: `ORG/NAME[@REV]` downloaded from the Hub (or a mirror) into the
 * origin-private file system, resumed after a cut or a reload, and listed as the tab's cached models.
 *
 * The layout follows the Hugging Face cache (src/formats/hf-hub-cache.ts), so the same rules find a
 * complete snapshot; OPFS has no links, so a snapshot holds the files themselves, not links into blobs/:
 *
 *   hf-hub/models--ORG--NAME/refs/<REV>                        the commit a branch or tag pointed to
 *   hf-hub/models--ORG--NAME/snapshots/<commit>/<file>         a downloaded file
 *   hf-hub/models--ORG--NAME/snapshots/<commit>/<file>.incomplete   what a cut download left (appended
 *                                                              with a Range request next time)
 *
 * The Hub's API (the commit, the file list, errors by status) goes through `@huggingface/hub`; the files
 * are fetched here, because its download neither resumes nor reports bytes. Weights come last, so a
 * snapshot with its weights is complete. The token is used for the requests and never stored.
 */
import { HubApiError, listFiles, modelInfo, type ListFileEntry } from '@huggingface/hub';
import {
  cachedSnapshot,
  downloadOrder,
  missingWeightFiles,
  parseHubModelId,
  repoFolderName,
  wantedHubFile,
  type HubModelId,
} from '../formats/hf-hub-cache.ts';
import { OpfsFileStore } from './browser-opfs.ts';

export const HUB_CACHE_ROOT = 'hf-hub';
export const DEFAULT_HUB_URL = 'https://huggingface.co';

export interface HubDownloadOptions {
  /** The Hub, or a mirror (the page's ?HF_ENDPOINT=); default huggingface.co. */
  hubUrl?: string;
  /** A read token for gated or private models. */
  token?: string;
  onProgress?: (p: { path: string; loaded: number; total: number }) => void;
}

export interface HubModel {
  store: OpfsFileStore;
  /** `ORG/NAME@commit`: what a saved run records. */
  id: string;
  /** Found complete in the tab's cache: nothing was fetched. */
  cached: boolean;
}

/** One model in the tab's cache. */
export interface CachedHubModel {
  repo: string;
  commit: string;
  /** The branches or tags that pointed to it when it was downloaded. */
  refs: string[];
  complete: boolean;
  bytes: number;
}

const cache = () => new OpfsFileStore(HUB_CACHE_ROOT);

/** The model `spec` names: from the tab's cache when complete there, else downloaded (resuming what a cut left). */
export async function hubModel(spec: string, options: HubDownloadOptions = {}): Promise<HubModel> {
  const id = parseHubModelId(spec.trim());
  if (!id) throw new Error(`"${spec}" is not a Hugging Face model id (ORG/NAME or ORG/NAME@REVISION)`);
  const snapshot = await cachedSnapshot(cache(), id);
  if (snapshot) {
    const store = new OpfsFileStore(`${HUB_CACHE_ROOT}/${snapshot}`);
    if ((await missingWeightFiles(store)).length === 0) return { store, id: `${id.repo}@${snapshot.split('/').pop()}`, cached: true };
  }
  const hubUrl = (options.hubUrl || DEFAULT_HUB_URL).replace(/\/+$/, '');
  try {
    return await download(id, hubUrl, options);
  } catch (err) {
    throw new Error(`${spec}: ${errorLine(err, hubUrl, id, options.token !== undefined && options.token !== '')}`, { cause: err });
  }
}

function errorLine(err: unknown, hubUrl: string, id: HubModelId, hasToken: boolean): string {
  if (err instanceof HubApiError) {
    if (err.statusCode === 401 || err.statusCode === 403)
      return hasToken
        ? `the Hub refused the token (${err.statusCode}): it may be expired or lack read access, or the model is gated (accept its terms on ${hubUrl}/${id.repo})`
        : `the Hub answered ${err.statusCode}: no such model, or a gated or private one that needs a token (enter one in the token field)`;
    if (err.statusCode === 404) return `no model ${id.repo} at revision ${id.revision} on ${hubUrl} (404)`;
    return `the Hub answered ${err.statusCode} (${err.message})`;
  }
  if (err instanceof TypeError) return `could not reach ${hubUrl} (${err.message}); check the connection, and load again to resume`;
  return (err as Error).message;
}

async function download(id: HubModelId, hubUrl: string, options: HubDownloadOptions): Promise<HubModel> {
  const credentials = options.token ? { accessToken: options.token as `hf_${string}` } : {};
  const info = await modelInfo({ name: id.repo, revision: id.revision, additionalFields: ['sha'], hubUrl, ...credentials });
  const commit = info.sha;
  if (!/^[0-9a-f]{40}$/.test(commit ?? '')) throw new Error(`the Hub gave no commit for ${id.repo}@${id.revision}`);
  const listed: ListFileEntry[] = [];
  for await (const entry of listFiles({ repo: id.repo, revision: commit, recursive: false, hubUrl, ...credentials }))
    if (wantedHubFile(entry)) listed.push(entry);
  if (!listed.some((f) => f.path === 'config.json')) throw new Error(`${id.repo}@${id.revision} has no config.json: not a model folder`);
  const files = downloadOrder(listed);
  const repoDir = repoFolderName(id.repo);
  if (commit !== id.revision) await cache().writeAtomic(`${repoDir}/refs/${id.revision}`, new TextEncoder().encode(commit));
  const snapshot = new OpfsFileStore(`${HUB_CACHE_ROOT}/${repoDir}/snapshots/${commit}`);
  const total = files.reduce((a, f) => a + (f.lfs?.size ?? f.size), 0);
  let done = 0;
  for (const file of files) {
    const size = file.lfs?.size ?? file.size;
    if (!(await snapshot.exists(file.path))) {
      const url = `${hubUrl}/${id.repo}/resolve/${commit}/${encodeURIComponent(file.path)}`;
      await fetchResumable(url, snapshot, file.path, size, options.token, (n) =>
        options.onProgress?.({ path: file.path, loaded: done + n, total }),
      );
    }
    done += size;
    options.onProgress?.({ path: file.path, loaded: done, total });
  }
  const missing = await missingWeightFiles(snapshot);
  if (missing.length > 0)
    throw new Error(
      `${id.repo}@${id.revision} has no safetensors weights SpecLab can load (missing ${missing.join(', ')}); .bin-only models are not read`,
    );
  return { store: snapshot, id: `${id.repo}@${commit}`, cached: false };
}

/** GET `url` into `path` through `path.incomplete`, asking only for the bytes a cut download did not keep. */
async function fetchResumable(
  url: string,
  dir: OpfsFileStore,
  path: string,
  size: number,
  token: string | undefined,
  onBytes: (n: number) => void,
): Promise<void> {
  const partial = `${path}.incomplete`;
  let have = (await dir.exists(partial)) ? await dir.size(partial) : 0;
  if (have > size) {
    await dir.remove(partial);
    have = 0;
  }
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  if (have > 0 && have < size) headers.range = `bytes=${have}-`;
  const response = have === size ? undefined : await fetch(url, { headers });
  if (response && (!response.ok || !response.body))
    throw new HubApiError(
      url,
      response.status,
      response.headers.get('x-request-id') ?? undefined,
      `GET ${url}: ${response.status} ${response.statusText}`,
    );
  if (response && have > 0 && response.status !== 206) {
    // The server sent the whole file: start the partial again.
    await dir.remove(partial);
    have = 0;
  } else if (response && have > 0 && !new RegExp(`^bytes ${have}-`).test(response.headers.get('content-range') ?? '')) {
    await dir.remove(partial);
    throw new Error(
      `${url}: asked for bytes ${have}- and got ${response.headers.get('content-range') ?? 'no Content-Range'}; load again to download it afresh`,
    );
  }
  let written = have;
  if (response) {
    try {
      written = await dir.append(partial, response.body as unknown as AsyncIterable<Uint8Array>, onBytes);
    } catch (err) {
      const kept = await dir.size(partial).catch(() => 0);
      throw new Error(`${path}: the download was cut at ${kept} of ${size} bytes (${(err as Error).message}); load again to resume`, {
        cause: err,
      });
    }
  }
  if (written !== size) throw new Error(`${path}: got ${written} of ${size} bytes; load again to resume`);
  await dir.rename(partial, path.split('/').pop()!);
}

/** The models in the tab's cache, complete or cut, with their size. */
export async function cachedHubModels(): Promise<CachedHubModel[]> {
  const out: CachedHubModel[] = [];
  for (const folder of await cache().list('')) {
    if (!folder.startsWith('models--')) continue;
    const repo = folder.slice('models--'.length).split('--').join('/');
    const refs = new Map<string, string[]>();
    for (const ref of await cache().list(`${folder}/refs`)) {
      const commit = new TextDecoder().decode(await cache().read(`${folder}/refs/${ref}`)).trim();
      refs.set(commit, [...(refs.get(commit) ?? []), ref]);
    }
    for (const commit of await cache().list(`${folder}/snapshots`)) {
      const snapshot = new OpfsFileStore(`${HUB_CACHE_ROOT}/${folder}/snapshots/${commit}`);
      let bytes = 0;
      for (const name of await snapshot.list('')) bytes += await snapshot.size(name);
      const complete = (await snapshot.exists('config.json')) && (await missingWeightFiles(snapshot).catch(() => ['?'])).length === 0;
      out.push({ repo, commit, refs: refs.get(commit) ?? [], complete, bytes });
    }
  }
  return out;
}

/** Removes a model (every snapshot of `repo`) from the tab's cache. */
export async function removeCachedHubModel(repo: string): Promise<void> {
  await cache().remove(repoFolderName(repo));
}
