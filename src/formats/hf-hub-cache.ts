/**
 * Hugging Face model ids and the Hugging Face cache, as transformers, SGLang and vLLM lay it out, so
 * that SpecLab reads the copy they already downloaded and writes where they will find it:
 *
 *   <cache>/models--ORG--NAME/refs/<revision>          the commit a branch or tag points to (text)
 *   <cache>/models--ORG--NAME/snapshots/<commit>/...    the files of that commit (links into blobs/)
 *   <cache>/models--ORG--NAME/blobs/<etag>              the files' bytes
 *
 * `<cache>` is HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub (`hubCacheDir`). Pure: paths and a FileStore over the cache, no network,
 * no runtime globals (the platform passes the environment in).
 */
import type { FileStore } from '../ports/storage.ts';
import { READ_BUDGETS } from '../ports/read-budget.ts';

/** `ORG/NAME` with an optional `@REVISION` (a branch, a tag or a commit). */
export interface HubModelId {
  readonly repo: string;
  readonly revision: string;
}

/** Hub names: letters, digits, `-`, `_`, `.`; no `..` and no leading or trailing `-`/`.` (the Hub's own rule, loosely). */
const NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$/;
const REVISION = /^[A-Za-z0-9._/-]+$/;

/**
 * Parses `ORG/NAME[@REV]`; undefined when `spec` is not shaped as a model id (a path such as `./m`,
 * `/models/x`, `a/b/c`, or a URL). Whether a spec that is both an id and an existing folder means the
 * folder is the caller's rule (a folder wins).
 */
export function parseHubModelId(spec: string): HubModelId | undefined {
  const at = spec.indexOf('@');
  const repo = at >= 0 ? spec.slice(0, at) : spec;
  const revision = at >= 0 ? spec.slice(at + 1) : 'main';
  const parts = repo.split('/');
  // `--` is refused as the Hub refuses it: the cache folder joins ORG and NAME with `--`.
  if (parts.length !== 2 || !parts.every((p) => NAME.test(p) && !p.includes('..') && !p.includes('--'))) return undefined;
  if (!REVISION.test(revision) || revision.includes('..') || revision.startsWith('/')) return undefined;
  return { repo, revision };
}

/** The environment the cache location and the token come from (the platform's `env`). */
export type HubEnv = (name: string) => string | undefined;

/** The cache folder: HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. */
export function hubCacheDir(env: HubEnv): string {
  const cache = env('HF_HUB_CACHE');
  if (cache) return cache;
  return `${hubHome(env)}/hub`;
}

/** HF_HOME, else XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface. */
export function hubHome(env: HubEnv): string {
  const home = env('HF_HOME');
  if (home) return home;
  const xdg = env('XDG_CACHE_HOME');
  return `${xdg || `${env('HOME') ?? ''}/.cache`}/huggingface`;
}

/** True when HF_HUB_OFFLINE is set to a true value (1, ON, YES, TRUE), as huggingface_hub reads it. */
export function hubOffline(env: HubEnv): boolean {
  return ['1', 'ON', 'YES', 'TRUE'].includes((env('HF_HUB_OFFLINE') ?? '').toUpperCase());
}

/** The folder of a model repo in the cache: `models--ORG--NAME`. */
export function repoFolderName(repo: string): string {
  return `models--${repo.split('/').join('--')}`;
}

const COMMIT = /^[0-9a-f]{40}$/;

/**
 * The cached snapshot folder of `id` (relative to the cache root), when the cache holds that
 * revision with a `config.json`: a commit hash names its snapshot; a branch or tag is looked up in
 * `refs/`. Undefined when it is not there (the caller downloads, or refuses offline).
 */
export async function cachedSnapshot(cache: FileStore, id: HubModelId): Promise<string | undefined> {
  const folder = repoFolderName(id.repo);
  let commit = id.revision;
  if (!COMMIT.test(commit)) {
    const ref = `${folder}/refs/${id.revision}`;
    if (!(await cache.exists(ref))) return undefined;
    commit = new TextDecoder().decode(await cache.read(ref, READ_BUDGETS.smallText)).trim();
    if (!COMMIT.test(commit)) throw new Error(`${cache.root}/${ref}: not a commit hash (${JSON.stringify(commit.slice(0, 60))})`);
  }
  const snapshot = `${folder}/snapshots/${commit}`;
  return (await cache.exists(`${snapshot}/config.json`)) ? snapshot : undefined;
}

/**
 * The weight files a snapshot must hold for a target to load: `model.safetensors`, or every shard a
 * `model.safetensors.index.json` names. Returns the missing ones (empty when complete).
 */
export async function missingWeightFiles(snapshot: FileStore): Promise<string[]> {
  if (await snapshot.exists('model.safetensors')) return [];
  const index = 'model.safetensors.index.json';
  if (!(await snapshot.exists(index))) return ['model.safetensors (or model.safetensors.index.json)'];
  let weightMap: unknown;
  const indexBytes = await snapshot.read(index, READ_BUDGETS.config);
  try {
    weightMap = (JSON.parse(new TextDecoder().decode(indexBytes)) as { weight_map?: unknown }).weight_map;
  } catch (err) {
    throw new Error(`${snapshot.root}/${index}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  const values = weightMap && typeof weightMap === 'object' && !Array.isArray(weightMap) ? Object.values(weightMap) : [];
  if (values.length === 0 || !values.every((v) => typeof v === 'string'))
    throw new Error(`${snapshot.root}/${index}: weight_map must map tensor names to shard files`);
  const shards = [...new Set(values as string[])];
  const missing: string[] = [];
  for (const shard of shards) if (!(await snapshot.exists(shard))) missing.push(shard);
  return missing;
}

/** The access token: HF_TOKEN, else the token file (HF_TOKEN_PATH, else HF_HOME/token); undefined without one. */
export async function hubToken(env: HubEnv, readFile: (path: string) => Promise<Uint8Array | undefined>): Promise<string | undefined> {
  const fromEnv = env('HF_TOKEN')?.trim();
  if (fromEnv) return fromEnv;
  const file = env('HF_TOKEN_PATH') || `${hubHome(env)}/token`;
  const bytes = await readFile(file);
  const token = bytes ? new TextDecoder().decode(bytes).trim() : '';
  return token || undefined;
}

/** What a target needs of a model repo: its top-level configs, tokenizer files and safetensors weights. */
export function wantedHubFile(entry: { readonly type: string; readonly path: string }): boolean {
  if (entry.type !== 'file' || entry.path.includes('/')) return false;
  return /\.(json|safetensors|jinja|model|txt|tiktoken)$/.test(entry.path) || entry.path.startsWith('tokenizer');
}

/** The order to download in: weights last, so a cut download never leaves weights without their config and tokenizer. */
export function downloadOrder<T extends { readonly path: string }>(files: readonly T[]): T[] {
  const isWeight = (f: T) => f.path.endsWith('.safetensors');
  return [...files].sort((a, b) => Number(isWeight(a)) - Number(isWeight(b)) || a.path.localeCompare(b.path));
}
