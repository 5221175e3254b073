/**
 * The lab worker's GPU and model: acquiring WebGPU, loading the bundled lab target (or a picked,
 * dropped or URL model directory) with its prompts, and what the page's memory plan needs.
 */
import { HfCheckpointSource } from '../../src/formats/hf-checkpoint-source.ts';
import { LAB_PROMPTS_FILE, parseLabPrompts } from '../../src/corpus/lab-prompts.ts';
import { ChatTokenizer } from '../../src/formats/tokenizer.ts';
import { environmentGpuRequest } from '../../src/gpu/context.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { TargetModel } from '../../src/model/target/model.ts';
import { urlStore } from '../../src/platform/browser-model-url.ts';
import { cachedHubModels, hubModel, removeCachedHubModel } from '../../src/platform/browser-hub.ts';
import type { FileStore } from '../../src/ports/storage.ts';
import { Rng } from '../../src/util/random.ts';
import { restoreData } from './worker-conversations.ts';
import { reportSavedRun } from './worker-run.ts';
import { closeSession, lab, phase, platform, post } from './worker-state.ts';

/** The Hub or a mirror: the page's ?HF_ENDPOINT=, as the environment variable of the same name. */
let hubUrl: string | undefined;

export async function init(labTargetUrl: string, search: string): Promise<void> {
  const query = new URLSearchParams(search);
  hubUrl = query.get('HF_ENDPOINT') ?? undefined;
  try {
    lab.ctx = await platform.acquireGpu(environmentGpuRequest({}, (name) => query.get(name) ?? undefined));
  } catch (err) {
    post({ type: 'gpu-error', message: `WebGPU is not available here: ${(err as Error).message}` });
    phase('error', 'no WebGPU');
    return;
  }
  const context = lab.ctx;
  context.device.lost.then((info) => {
    if (!context.isDestroyed)
      post({
        type: 'gpu-error',
        message: `the GPU device was lost (${info.reason}): ${info.message}. Reload the page; training continues from the last checkpoint.`,
      });
  });
  post({ type: 'adapter', record: context.record });
  lab.gpu = new Gpu(context);
  await loadModel(modelUrlStore(labTargetUrl), 'lab-target', true);
  await reportSavedRun();
  await reportHubCache();
}

/** The tab's cached Hugging Face models, for the page's list. */
export async function reportHubCache(): Promise<void> {
  try {
    post({ type: 'hub-cache', models: await cachedHubModels() });
  } catch (err) {
    post({ type: 'error', message: `cached models: ${(err as Error).message}` });
  }
}

/** The repo a Hub load is reading now: it cannot be removed from the cache under the load. */
let loadingRepo: string | undefined;

/** `ORG/NAME[@REV]`: the tab's cached copy, else downloaded with progress (a cut download resumes next time). */
export async function loadHubModel(spec: string, token: string): Promise<void> {
  if (lab.running) {
    post({ type: 'model', state: 'error', message: 'stop the training run before loading another model' });
    return;
  }
  post({ type: 'model', state: 'loading', message: `resolving ${spec}` });
  loadingRepo = spec.trim().split('@')[0];
  try {
    await resolveAndLoad(spec, token);
  } finally {
    loadingRepo = undefined;
  }
}

async function resolveAndLoad(spec: string, token: string): Promise<void> {
  let model;
  try {
    model = await hubModel(spec, {
      hubUrl,
      token: token || undefined,
      onProgress: (p) => post({ type: 'model', state: 'loading', message: `downloading ${p.path}`, loaded: p.loaded, total: p.total }),
    });
  } catch (err) {
    post({ type: 'model', state: 'error', message: `refused ${(err as Error).message}` });
    await reportHubCache();
    return;
  }
  await reportHubCache();
  await loadModel(model.store, model.id, false);
}

export async function removeCachedModel(repo: string): Promise<void> {
  if (loadingRepo === repo) {
    post({ type: 'error', message: `${repo} is loading: wait for it, and load another model before removing it from the cache` });
    return;
  }
  if (lab.model?.id.startsWith(`${repo}@`)) {
    post({ type: 'error', message: `${repo} is the loaded model: load another before removing it from the cache` });
    return;
  }
  await removeCachedHubModel(repo);
  await reportHubCache();
}

/** A model directory over HTTP whose downloads show on the model panel. */
export function modelUrlStore(url: string): FileStore {
  return urlStore(url, {
    onProgress: (p) => post({ type: 'model', state: 'loading', message: `fetching ${p.path}`, loaded: p.fetchedBytes }),
  });
}

export async function loadModel(store: FileStore, id: string, bundled: boolean): Promise<void> {
  if (lab.running) {
    post({ type: 'model', state: 'error', message: 'stop the training run before loading another model' });
    return;
  }
  post({ type: 'model', state: 'loading', message: `loading ${id}` });
  try {
    // Headers first (a wrong or incomplete model is refused before any weight is read), then the
    // weights streamed onto the GPU slice by slice.
    const source = await HfCheckpointSource.open(store, '');
    const config = source.config;
    const tokenizer = (await store.exists('tokenizer.json')) ? await ChatTokenizer.load(store, '') : undefined;
    let train: number[][];
    let heldOut: number[][];
    let heldText: string[];
    if (bundled) {
      const prompts = parseLabPrompts(await store.read(LAB_PROMPTS_FILE), `${store.root}/${LAB_PROMPTS_FILE}`, config.vocabSize);
      train = prompts.train.map((p) => p.ids);
      heldOut = prompts.heldOut.map((p) => p.ids);
      heldText = prompts.heldOut.map((p) => p.text);
    } else {
      // Any other model: seeded random-token prompts (no corpus for its tokenizer is bundled).
      const rng = new Rng(0);
      const make = (n: number) => Array.from({ length: n }, () => Array.from({ length: 8 }, () => rng.int(0, config.vocabSize)));
      train = make(64);
      heldOut = make(8);
      heldText = heldOut.map((ids) => (tokenizer ? tokenizer.decode(ids) : ids.join(' ')));
    }
    const target = await TargetModel.load(lab.gpu!, source, {
      onProgress: (loaded, total) => post({ type: 'model', state: 'loading', message: `loading ${id}`, loaded, total }),
    });
    closeSession();
    lab.model?.target.destroy();
    lab.model = { id, config, target, tokenizer, train, heldOut, heldText };
    lab.imported = undefined;
    const c = config;
    post({
      type: 'model',
      state: 'ready',
      message: `${id}: ${c.architecture}, ${c.numLayers} layers, hidden ${c.hiddenSize}, vocab ${c.vocabSize}`,
      id,
    });
    // The kept conversations, read with this model's tokenizer; then the held-out prompts and the memory plan's basis.
    await restoreData();
  } catch (err) {
    post({ type: 'model', state: 'error', message: `refused ${id}: ${(err as Error).message}` });
  }
}
