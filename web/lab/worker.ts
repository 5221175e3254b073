/**
 * The lab's Web Worker: owns the GPU device, the target model, the training session and every
 * IndexedDB store, so the page stays responsive while the same loops as `speclab train` run here.
 *
 * Storage (IndexedDB through src/platform/browser.ts, kept across reloads):
 *   speclab-lab              run.json (settings, model id, total steps) and the last export
 *   speclab-lab-checkpoints  the session's checkpoints and sequences.json
 *   speclab-lab-spill        committed features not yet acked (they survive a closed tab)
 *   speclab-lab-ledger       the IndexedDB metadata store: commits and the durable ack
 * A reloaded tab finds run.json and the ledger, reports the saved run, and `continue` reopens the
 * session, which resumes from the checkpoint of the acked step.
 * The session also scores the draft on the held-out prompts every few steps (./evaluation.ts).
 */
/// <reference lib="webworker" />
import { IndexedDbMetadataStore } from '../../src/control/indexeddb-metadata-store.ts';
import { loadHfCheckpoint, type TargetCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { LAB_PROMPTS_FILE, parseLabPrompts } from '../../src/corpus/lab-prompts.ts';
import { ChatTokenizer } from '../../src/formats/tokenizer.ts';
import type { GpuContext } from '../../src/gpu/context.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Eagle3DraftCheckpoint } from '../../src/inference/eagle3-drafter.ts';
import { evaluateDraft } from '../../src/inference/evaluate-draft.ts';
import { timeTargetOnly } from '../../src/inference/speculative.ts';
import { readEagle3Export, withoutEmbedding, writeEagle3Export } from '../../src/model/eagle3/export.ts';
import { TargetModel } from '../../src/model/target/model.ts';
import { browserPlatform as platform } from '../../src/platform/browser.ts';
import { pickedFilesStore, urlStore } from '../../src/platform/browser-model-files.ts';
import type { FileStore } from '../../src/ports/storage.ts';
import { Rng } from '../../src/util/random.ts';
import { Eagle3TrainingSession, sessionSettingsSchema } from '../../src/training/eagle3-session.ts';
import type { PeriodicEvalSettings } from '../../src/training/periodic-eval.ts';
import { resolveAuxLayers, resolveDraftVocabSize } from '../../src/training/run-plan.ts';
import { evalReport, labEvaluation } from './evaluation.ts';
import { adapterLimitsOf, LAB_ROUND_PROMPTS, type Command, type LabSettings, type Phase, type Report, type RunStatus } from './protocol.ts';
import { readSavedRun as readSavedRunFrom, writeSavedRun as writeSavedRunTo, type SavedRun } from './saved-run.ts';

const LAB_FILES = 'speclab-lab';
const CHECKPOINTS = 'speclab-lab-checkpoints';
const SPILL = 'speclab-lab-spill';
const LEDGER = 'speclab-lab-ledger';
const RUN_ID = 'lab';

interface LoadedModel {
  id: string;
  checkpoint: TargetCheckpoint;
  target: TargetModel;
  tokenizer: ChatTokenizer | undefined;
  train: number[][];
  heldOut: number[][];
}

const scope = self as unknown as DedicatedWorkerGlobalScope;
let ctx: GpuContext | undefined;
let gpu: Gpu | undefined;
let model: LoadedModel | undefined;
let session: Eagle3TrainingSession | undefined;
/** The open session's held-out evaluation (its steps carry `eval` when it is due). */
let evaluation: PeriodicEvalSettings | undefined;
let metadata: IndexedDbMetadataStore | undefined;
let imported: { draft: Eagle3DraftCheckpoint; label: string } | undefined;
let running = false;
let pauseRequested = false;
let stopRequested = false;
let wake: (() => void) | undefined;

function post(report: Report, transfer: Transferable[] = []): void {
  scope.postMessage(report, transfer);
}

function phase(p: Phase, detail = ''): void {
  post({ type: 'phase', phase: p, detail });
}

const labFiles = () => platform.files(LAB_FILES);
const readSavedRun = () => readSavedRunFrom(labFiles());
const writeSavedRun = (run: SavedRun) => writeSavedRunTo(labFiles(), run);

/** The one default rule of every command (defaultAuxLayerIds), small targets included. */
function auxLayersFor(numLayers: number): number[] {
  return resolveAuxLayers(undefined, numLayers);
}

async function init(labTargetUrl: string): Promise<void> {
  try {
    ctx = await platform.acquireGpu();
  } catch (err) {
    post({ type: 'gpu-error', message: `WebGPU is not available here: ${(err as Error).message}` });
    phase('error', 'no WebGPU');
    return;
  }
  const context = ctx;
  context.device.lost.then((info) => {
    if (!context.isDestroyed) post({ type: 'gpu-error', message: `the GPU device was lost (${info.reason}): ${info.message}. Reload the page; training continues from the last checkpoint.` });
  });
  post({ type: 'adapter', record: ctx.record });
  gpu = new Gpu(ctx);
  await loadModel(modelUrlStore(labTargetUrl), 'lab-target', true);
  await reportSavedRun();
}

/** A model directory over HTTP whose downloads show on the model panel. */
function modelUrlStore(url: string): FileStore {
  return urlStore(url, { onProgress: (p) => post({ type: 'model', state: 'loading', message: `fetching ${p.path}`, loaded: p.fetchedBytes }) });
}

async function loadModel(store: FileStore, id: string, lab: boolean): Promise<void> {
  if (running) {
    post({ type: 'model', state: 'error', message: 'stop the training run before loading another model' });
    return;
  }
  post({ type: 'model', state: 'loading', message: `loading ${id}` });
  try {
    const checkpoint = await loadHfCheckpoint(store, '', { onProgress: (loaded, total) => post({ type: 'model', state: 'loading', message: `loading ${id}`, loaded, total }) });
    const tokenizer = (await store.exists('tokenizer.json')) ? await ChatTokenizer.load(store, '') : undefined;
    let train: number[][];
    let heldOut: number[][];
    let heldText: string[];
    if (lab) {
      const prompts = parseLabPrompts(await store.read(LAB_PROMPTS_FILE), `${store.root}/${LAB_PROMPTS_FILE}`, checkpoint.config.vocabSize);
      train = prompts.train.map((p) => p.ids);
      heldOut = prompts.heldOut.map((p) => p.ids);
      heldText = prompts.heldOut.map((p) => p.text);
    } else {
      // Any other model: seeded random-token prompts (no corpus for its tokenizer is bundled).
      const rng = new Rng(0);
      const make = (n: number) => Array.from({ length: n }, () => Array.from({ length: 8 }, () => rng.int(0, checkpoint.config.vocabSize)));
      train = make(64);
      heldOut = make(8);
      heldText = heldOut.map((ids) => (tokenizer ? tokenizer.decode(ids) : ids.join(' ')));
    }
    const target = TargetModel.create(gpu!, checkpoint);
    closeSession();
    model?.target.destroy();
    model = { id, checkpoint, target, tokenizer, train, heldOut };
    imported = undefined;
    const c = checkpoint.config;
    post({ type: 'model', state: 'ready', message: `${id}: ${c.architecture}, ${c.numLayers} layers, hidden ${c.hiddenSize}, vocab ${c.vocabSize}` });
    post({ type: 'prompts', heldOut: heldText });
    // What the page's memory plan needs (it is computed there, on every settings change).
    post({ type: 'memory-basis', target: c, trainPromptLengths: train.map((p) => p.length), heldOut: heldOut.length, roundPrompts: LAB_ROUND_PROMPTS, limits: adapterLimitsOf(gpu!.ctx.limits) });
  } catch (err) {
    post({ type: 'model', state: 'error', message: `refused ${id}: ${(err as Error).message}` });
  }
}

async function ledger(): Promise<IndexedDbMetadataStore> {
  metadata ??= await IndexedDbMetadataStore.open(platform, LEDGER);
  return metadata;
}

async function reportSavedRun(): Promise<void> {
  let saved: SavedRun | undefined;
  try {
    saved = await readSavedRun();
  } catch (err) {
    // Never trained on: the page offers only Discard until the run is gone.
    post({ type: 'damaged-run', message: `${(err as Error).message}. Discard the saved run to start again.` });
    return;
  }
  if (!saved) {
    post({ type: 'no-saved-run' });
    return;
  }
  const store = await ledger();
  const marker = await store.durableMarker();
  const step = marker.globalStep ?? 0;
  post({ type: 'saved-run', step, total: saved.total, settings: saved.settings, model: saved.model, finished: step >= saved.total, acked: marker.acked.size, committed: await store.committedCount() });
}

function sessionSettings(s: LabSettings, numLayers: number) {
  return sessionSettingsSchema.parse({
    epochs: s.epochs,
    roundPrompts: Math.min(LAB_ROUND_PROMPTS, s.trainPrompts),
    batchSize: s.batchSize,
    tttLength: s.tttLength,
    lr: s.lr,
    draftVocabSize: s.draftVocabSize,
    auxLayers: auxLayersFor(numLayers),
    responseLength: s.responseLength,
    rolloutWorkers: s.rolloutWorkers,
    checkpointEvery: 2,
    seed: 0,
  });
}

async function openSession(settings: LabSettings): Promise<Eagle3TrainingSession> {
  const m = model!;
  resolveDraftVocabSize(settings.draftVocabSize, m.checkpoint.config.vocabSize, 'draft vocab size');
  if (settings.trainPrompts > m.train.length) throw new Error(`training prompts: at most ${m.train.length} are bundled, ${settings.trainPrompts} asked for`);
  phase('data', `${m.heldOut.length} held-out prompts continued by the target for evaluation (${settings.responseLength} tokens each)`);
  evaluation = await labEvaluation(m.target, m.heldOut, settings);
  phase('data', `${settings.trainPrompts} prompts continued by the target (${settings.responseLength} tokens each)`);
  return Eagle3TrainingSession.open({
    gpu: gpu!,
    target: m.target,
    embedTokens: m.checkpoint.weights.embedTokens,
    trainPrompts: m.train.slice(0, settings.trainPrompts),
    evaluation,
    settings: sessionSettings(settings, m.checkpoint.config.numLayers),
    storage: { checkpoints: platform.files(CHECKPOINTS), metadata: await ledger(), spill: platform.files(SPILL) },
    runId: RUN_ID,
    now: () => performance.now(),
    onEvent: (e) => {
      if (e.kind === 'phase') phase(e.phase === 'data' ? 'data' : 'loading', e.detail);
    },
  });
}

async function runStatus(s: Eagle3TrainingSession): Promise<RunStatus> {
  const st = await s.status();
  return { controller: st.controller, residentBytes: st.featureStore.residentBytes, spillBytes: st.featureStore.spill?.bytesWritten ?? 0, round: st.round, rounds: st.rounds };
}

async function start(settings: LabSettings | undefined): Promise<void> {
  if (running) return;
  if (!model || !gpu) throw new Error('no model is loaded');
  running = true;
  pauseRequested = stopRequested = false;
  try {
    let saved = await readSavedRun();
    if (settings) {
      if (saved) throw new Error('a saved run exists: continue it, or discard it before starting a new one');
      saved = { settings, model: model.id, total: 0 };
    } else if (!saved) {
      throw new Error('no saved run to continue');
    } else if (saved.model !== model.id) {
      throw new Error(`the saved run trains a draft for ${saved.model}, but ${model.id} is loaded`);
    }
    session ??= await openSession(saved.settings);
    await writeSavedRun({ ...saved, total: session.totalSteps });
    const s = session;
    if (s.resumed) phase('training', `resumed after step ${s.resumed.step}: ${s.resumed.requeued} samples requeued from the spill`);
    else phase('training', '');
    post({ type: 'status', status: await runStatus(s), step: s.globalStep, total: s.totalSteps });
    for (;;) {
      if (stopRequested) {
        await s.flush();
        closeSession();
        phase('stopped', 'checkpoint written; press Continue to go on');
        await reportSavedRun();
        return;
      }
      if (pauseRequested) {
        await s.flush();
        phase('paused', `after step ${s.globalStep}`);
        await new Promise<void>((resolve) => (wake = resolve));
        if (!stopRequested) phase('training', '');
        continue;
      }
      const st = await s.step();
      if (!st) {
        phase('done', `${s.globalStep} steps`);
        post({ type: 'status', status: await runStatus(s), step: s.globalStep, total: s.totalSteps });
        await reportSavedRun();
        return;
      }
      post({
        type: 'step',
        step: { step: st.globalStep, total: st.totalSteps, loss: st.loss, plosses: st.plosses, accs: st.accs, simulatedAcceptance: st.simulatedAcceptance, tokensPerSecond: st.tokensPerSecond, lr: st.lr, checkpointed: st.checkpointed },
        status: await runStatus(s),
        eval: st.eval && evaluation ? evalReport(st.globalStep, evaluation, st.eval) : undefined,
      });
    }
  } finally {
    running = false;
  }
}

function closeSession(): void {
  session?.destroy();
  session = undefined;
  evaluation = undefined;
}

async function clearStore(files: FileStore): Promise<void> {
  for (const name of await files.list('')) await files.remove(name);
}

async function discard(): Promise<void> {
  if (running) throw new Error('stop the run before discarding it');
  closeSession();
  metadata?.close();
  metadata = undefined;
  await platform.deleteKeyValueDatabase(LEDGER);
  for (const root of [CHECKPOINTS, SPILL, LAB_FILES]) await clearStore(platform.files(root));
  phase('idle', 'saved run discarded');
  post({ type: 'no-saved-run' });
}

async function currentDraft(): Promise<{ draft: Eagle3DraftCheckpoint; label: string } | undefined> {
  if (imported) return imported;
  if (session) return { draft: await session.currentDraft(), label: `trained draft at step ${session.globalStep}` };
  return undefined;
}

async function specRun(prompt: number, maxNewTokens: number, numDraftTokens: number): Promise<void> {
  if (running && !pauseRequested) throw new Error('pause or stop training first: speculative decoding shares the GPU');
  const m = model!;
  const chosen = await currentDraft();
  if (!chosen) throw new Error('no draft yet: train one (or import an export) first');
  const ids = m.heldOut[prompt];
  if (!ids) throw new Error(`no held-out prompt ${prompt}`);
  const decode = (t: number[]) => (m.tokenizer ? m.tokenizer.decode(t) : t.join(' '));
  const now = () => performance.now();
  const base = await timeTargetOnly(m.target, [ids], maxNewTokens, now);
  const out: number[] = [];
  const result = await evaluateDraft(m.target, gpu!, chosen.draft, [ids], {
    maxNewTokens,
    numDraftTokens,
    auxLayerIds: chosen.draft.auxLayerIds ?? auxLayersFor(m.checkpoint.config.numLayers),
    reference: base.tokens,
    now,
    onVerify: (e) => {
      for (const t of e.accepted) {
        out.push(t);
        post({ type: 'spec-token', text: decode([t]), draft: true, first: false });
      }
      out.push(e.bonus);
      post({ type: 'spec-token', text: decode([e.bonus]), draft: false, first: e.first === true });
    },
  });
  post({
    type: 'spec-done',
    stats: { acceptance: result.acceptanceLength, lossless: result.lossless, tpsDraft: result.tokensPerSecond, tpsTarget: base.speed.tokensPerSecond, text: decode(out.slice(0, maxNewTokens)), targetText: decode(base.tokens[0]), draftSource: chosen.label },
  });
}

async function exportDraft(): Promise<void> {
  if (!session) throw new Error('no trained draft to export: start or continue a run first');
  const files = labFiles();
  await writeEagle3Export(files, 'export', session.draftConfig, await session.currentWeights(), { t2d: session.mapping.t2d, d2t: session.mapping.d2t }, { auxLayerIds: session.auxLayerIds });
  const out = await Promise.all(['config.json', 'model.safetensors'].map(async (name) => ({ name, bytes: await files.read(`export/${name}`) })));
  post({ type: 'export-files', files: out }, out.map((f) => f.bytes.buffer as ArrayBuffer));
}

async function importDraft(fileList: File[]): Promise<void> {
  const m = model!;
  try {
    const store = pickedFilesStore(fileList);
    const draft = await readEagle3Export(store, '', m.checkpoint.weights.embedTokens);
    const c = draft.config;
    const t = m.checkpoint.config;
    if (c.hiddenSize !== t.hiddenSize || c.vocabSize !== t.vocabSize) {
      throw new Error(`the draft (hidden ${c.hiddenSize}, vocab ${c.vocabSize}) does not fit the loaded target ${m.id} (hidden ${t.hiddenSize}, vocab ${t.vocabSize})`);
    }
    imported = { draft: { config: c, weights: withoutEmbedding(draft.values), d2t: draft.vocab.d2t, auxLayerIds: draft.auxLayerIds ?? auxLayersFor(t.numLayers) }, label: `imported draft (${fileList.map((f) => f.name).join(', ')})` };
    post({ type: 'import', state: 'ready', message: `imported: hidden ${c.hiddenSize}, draft vocab ${c.draftVocabSize}; the speculative panel uses it` });
  } catch (err) {
    post({ type: 'import', state: 'error', message: `import refused: ${(err as Error).message}` });
  }
}

async function handle(cmd: Command): Promise<void> {
  switch (cmd.type) {
    case 'init':
      return init(cmd.labTargetUrl);
    case 'start':
      return start(cmd.settings);
    case 'continue':
      return start(undefined);
    case 'pause':
      pauseRequested = true;
      return;
    case 'resume':
      pauseRequested = false;
      wake?.();
      return;
    case 'stop':
      stopRequested = true;
      pauseRequested = false;
      wake?.();
      return;
    case 'discard':
      return discard();
    case 'load-model-url':
      return loadModel(modelUrlStore(cmd.url), cmd.url, false);
    case 'load-model-files':
      return loadModel(pickedFilesStore(cmd.files, { label: cmd.folder }), cmd.folder ?? `${cmd.files.length} picked files`, false);
    case 'spec-run':
      try {
        return await specRun(cmd.prompt, cmd.maxNewTokens, cmd.numDraftTokens);
      } catch (err) {
        post({ type: 'spec-error', message: (err as Error).message });
        return;
      }
    case 'export':
      return exportDraft();
    case 'import':
      return importDraft(cmd.files);
  }
}

scope.onmessage = (event: MessageEvent<Command>) => {
  handle(event.data).catch((err: unknown) => {
    const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    post({ type: 'error', message });
    if (event.data.type === 'start' || event.data.type === 'continue') phase('error', message);
  });
};
