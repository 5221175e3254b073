/**
 * The lab page (main thread): controls, charts, panels. Every GPU, storage and training call runs in
 * the Web Worker (./worker.ts); this file only sends Commands and renders Reports (./protocol.ts).
 */
import { droppedDirectory, pickedDirectory, type PickedDirectory } from '../../src/platform/browser-model-files.ts';
import { LiveChart } from './charts.ts';
import { DEFAULT_SETTINGS, type Command, type EvalReport, type LabSettings, type Phase, type Report, type RunStatus } from './protocol.ts';
import { renderTttVisibility } from './ttt-visibility.ts';
import { renderMemoryPlan, type MemoryBasis } from './memory-plan-view.ts';

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module' });
const send = (cmd: Command) => worker.postMessage(cmd);

const status = $('status');
const evalStatus = $('eval-status');
const detail = $('run-detail');
const buttons = { start: $<HTMLButtonElement>('start'), pause: $<HTMLButtonElement>('pause'), resume: $<HTMLButtonElement>('resume'), stop: $<HTMLButtonElement>('stop'), discard: $<HTMLButtonElement>('discard') };
const specRun = $<HTMLButtonElement>('spec-run');
const exportButton = $<HTMLButtonElement>('export');

const SETTING_INPUTS: Record<keyof LabSettings, string> = {
  tttLength: 'ttt-length', draftVocabSize: 'draft-vocab', batchSize: 'batch-size', lr: 'lr',
  rolloutWorkers: 'rollout-workers', epochs: 'epochs', trainPrompts: 'train-prompts', responseLength: 'response-length',
};

function readSettings(): LabSettings {
  const out = { ...DEFAULT_SETTINGS };
  for (const [key, id] of Object.entries(SETTING_INPUTS) as [keyof LabSettings, string][]) {
    const input = $<HTMLInputElement>(id);
    const value = Number(input.value);
    if (!Number.isFinite(value) || value <= 0 || (key !== 'lr' && !Number.isInteger(value))) {
      throw new Error(`${input.labels?.[0]?.textContent?.trim() ?? key}: "${input.value}" is not a valid ${key === 'lr' ? 'positive number' : 'positive integer'}`);
    }
    out[key] = value;
  }
  return out;
}

function writeSettings(s: LabSettings): void {
  for (const [key, id] of Object.entries(SETTING_INPUTS) as [keyof LabSettings, string][]) $<HTMLInputElement>(id).value = String(s[key]);
  showMemoryPlan();
}

// ── GPU memory plan (memory-plan-view.ts): under the settings, redrawn when they or the model change ──
const memoryPlan = document.createElement('div');
memoryPlan.id = 'memory-plan';
memoryPlan.setAttribute('aria-live', 'polite');
$('settings').after(memoryPlan);
let memoryBasis: MemoryBasis | undefined;
function showMemoryPlan(): void {
  renderMemoryPlan(memoryPlan, memoryBasis, readSettings);
}
$('settings').addEventListener('input', showMemoryPlan);
showMemoryPlan();

// ── charts ──────────────────────────────────────────────────────────────────────────────────────
function chart(id: string, names: string[], format?: (v: number) => string): LiveChart {
  return new LiveChart($(id), document.querySelector<HTMLTableElement>(`.chart-numbers[data-for="${id}"]`)!, names, format);
}
let tttLength = DEFAULT_SETTINGS.tttLength;
let charts: Record<string, LiveChart> = {};
function buildCharts(ttt: number): void {
  tttLength = ttt;
  for (const id of ['chart-loss', 'chart-acc', 'chart-acceptance', 'chart-eval', 'chart-throughput', 'chart-queue', 'chart-lifecycle']) $(id).innerHTML = '';
  const steps = Array.from({ length: ttt }, (_, k) => `k=${k}`);
  charts = {
    loss: chart('chart-loss', steps.map((s) => `ploss ${s}`)),
    acc: chart('chart-acc', steps.map((s) => `acc ${s}`), (v) => v.toFixed(3)),
    acceptance: chart('chart-acceptance', ['training batch', 'held-out'], (v) => v.toFixed(3)),
    eval: chart('chart-eval', steps.map((s) => `held-out acc ${s}`), (v) => v.toFixed(3)),
    throughput: chart('chart-throughput', ['tokens/s'], (v) => v.toFixed(1)),
    queue: chart('chart-queue', ['queue depth', 'in flight', 'resident MB', 'spilled MB'], (v) => v.toFixed(2)),
    lifecycle: chart('chart-lifecycle', ['prompts pending', 'prompts leased', 'prompts done', 'samples committed', 'samples acked', 'train backlog'], (v) => v.toFixed(0)),
  };
  renderTttVisibility($('ttt-visibility'), ttt);
}
buildCharts(tttLength);

// ── run state ───────────────────────────────────────────────────────────────────────────────────
let phase: Phase = 'idle';
let modelReady = false;
let saved: { step: number; total: number; finished: boolean } | undefined;
/** The saved run failed its integrity check: only Discard is offered. */
let damagedRun = false;
let haveDraft = false;

function setStatus(attrs: Record<string, string | number>): void {
  for (const [k, v] of Object.entries(attrs)) status.dataset[k] = String(v);
  const d = status.dataset;
  const loss = d.loss ? `, loss ${Number(d.loss).toFixed(4)}` : '';
  status.textContent = `${d.phase}: step ${d.step}/${d.total}${loss}; samples committed ${d.committed}, durably acked ${d.acked}${d.resumable === 'true' ? ' — a saved run can be continued' : ''}`;
}

/** The latest held-out evaluation as text and data attributes (data-step, data-acc-len, data-acc0, data-loss). */
function showEval(e: EvalReport | undefined): void {
  for (const k of Object.keys(evalStatus.dataset)) delete evalStatus.dataset[k];
  if (!e) {
    evalStatus.dataset.state = 'idle';
    evalStatus.textContent = 'Held-out evaluation: not run yet (it runs every few steps and at the last).';
    return;
  }
  Object.assign(evalStatus.dataset, { state: 'done', step: String(e.step), accLen: String(e.simulatedAcceptance), acc0: String(e.accs[0] ?? Number.NaN), loss: String(e.loss), every: String(e.every), sequences: String(e.sequences), tokens: String(e.lossTokens) });
  evalStatus.textContent = `Held-out evaluation after step ${e.step} (${e.sequences} prompts, ${e.lossTokens} tokens, every ${e.every} steps): simulated acceptance length ${e.simulatedAcceptance.toFixed(3)}, acc k=0 ${(e.accs[0] ?? Number.NaN).toFixed(3)}, loss ${e.loss.toFixed(4)}`;
}

function refreshButtons(): void {
  const busy = phase === 'loading' || phase === 'data' || phase === 'training';
  buttons.start.disabled = !modelReady || busy || phase === 'paused' || (saved?.finished ?? false) || damagedRun;
  buttons.start.textContent = saved && !saved.finished ? `Continue (step ${saved.step} of ${saved.total})` : 'Start';
  buttons.pause.disabled = phase !== 'training';
  buttons.resume.disabled = phase !== 'paused';
  buttons.stop.disabled = !(phase === 'training' || phase === 'paused' || phase === 'data');
  buttons.discard.disabled = busy || phase === 'paused' || (!saved && !damagedRun);
  specRun.disabled = !modelReady || busy || !haveDraft;
  exportButton.disabled = busy || !haveDraft || !saved;
  for (const id of Object.values(SETTING_INPUTS)) $<HTMLInputElement>(id).disabled = busy || phase === 'paused' || saved !== undefined;
}

function applyStatus(s: RunStatus): void {
  const c = s.controller;
  setStatus({ acked: c.durableAcked, committed: c.samplesCommitted });
  detail.textContent = `round ${s.round}/${s.rounds} · queue ${c.queueDepth} pending, ${c.queueInFlight} in flight · feature store ${(s.residentBytes / 1e6).toFixed(2)} MB on the GPU, ${(s.spillBytes / 1e6).toFixed(2)} MB spilled`;
}

function handle(r: Report): void {
  switch (r.type) {
    case 'adapter': {
      const a = r.record;
      $('adapter').textContent = `${a.description || a.device || a.vendor} (${a.architecture || 'unknown architecture'}${a.isFallbackAdapter ? ', software fallback' : ''})\nfeatures: ${a.features.join(', ')}\nlimits: ${Object.entries(a.limits).map(([k, v]) => `${k}=${v}`).join(', ')}`;
      return;
    }
    case 'gpu-error':
      $('gpu-error').textContent = r.message;
      $('gpu-error').hidden = false;
      return;
    case 'phase':
      phase = r.phase;
      setStatus({ phase: r.phase });
      if (r.detail) detail.textContent = r.detail;
      if (r.phase === 'done' || r.phase === 'paused' || r.phase === 'stopped') haveDraft = true;
      refreshButtons();
      return;
    case 'saved-run':
      saved = r;
      damagedRun = false;
      haveDraft ||= r.step > 0;
      writeSettings(r.settings);
      if (r.settings.tttLength !== tttLength) buildCharts(r.settings.tttLength);
      setStatus({ step: r.step, total: r.total, acked: r.acked, committed: r.committed, resumable: String(!r.finished && phase !== 'training') });
      refreshButtons();
      return;
    case 'damaged-run':
      saved = undefined;
      damagedRun = true;
      detail.textContent = r.message;
      detail.dataset.state = 'error';
      setStatus({ resumable: 'false', damaged: 'true' });
      refreshButtons();
      return;
    case 'no-saved-run':
      saved = undefined;
      damagedRun = false;
      delete status.dataset.damaged;
      setStatus({ step: 0, total: 0, resumable: 'false', acked: 0, committed: 0 });
      refreshButtons();
      return;
    case 'step': {
      const s = r.step;
      if (s.step === 1 || status.dataset.firstLoss === undefined) setStatus({ firstLoss: s.loss });
      setStatus({ step: s.step, total: s.total, loss: s.loss, resumable: 'false' });
      applyStatus(r.status);
      const c = r.status.controller;
      charts.loss.push(s.step, s.plosses);
      charts.acc.push(s.step, s.accs);
      charts.acceptance.push(s.step, [s.simulatedAcceptance, r.eval?.simulatedAcceptance]);
      if (r.eval) {
        charts.eval.push(s.step, r.eval.accs);
        showEval(r.eval);
      }
      charts.throughput.push(s.step, [s.tokensPerSecond]);
      charts.queue.push(s.step, [c.queueDepth, c.queueInFlight, r.status.residentBytes / 1e6, r.status.spillBytes / 1e6]);
      charts.lifecycle.push(s.step, [c.promptsPending, c.promptsLeased, c.promptsCompleted, c.samplesCommitted, c.durableAcked, c.trainBacklog]);
      return;
    }
    case 'status':
      setStatus({ step: r.step, total: r.total });
      applyStatus(r.status);
      return;
    case 'model': {
      const el = $('model-status');
      el.dataset.state = r.state;
      el.textContent = r.message;
      const progress = $<HTMLProgressElement>('model-progress');
      if (r.total) {
        progress.max = r.total;
        progress.value = r.loaded ?? 0;
      } else if (r.state !== 'loading') {
        progress.max = 1;
        progress.value = r.state === 'ready' ? 1 : 0;
      } else {
        progress.removeAttribute('value');
      }
      if (r.state === 'ready') modelReady = true;
      refreshButtons();
      return;
    }
    case 'memory-basis':
      memoryBasis = r;
      showMemoryPlan();
      return;
    case 'prompts': {
      const select = $<HTMLSelectElement>('spec-prompt');
      select.innerHTML = r.heldOut.map((text, i) => `<option value="${i}"></option>`).join('');
      r.heldOut.forEach((text, i) => (select.options[i].textContent = `${i + 1}. ${text}`));
      return;
    }
    case 'spec-token': {
      const span = document.createElement('span');
      span.textContent = r.text;
      if (r.draft) span.className = 'draft';
      $('spec-output').append(span);
      return;
    }
    case 'spec-done': {
      const s = r.stats;
      const el = $('spec-stats');
      Object.assign(el.dataset, { state: 'done', acceptance: String(s.acceptance), lossless: String(s.lossless), tpsDraft: String(s.tpsDraft), tpsTarget: String(s.tpsTarget), text: s.text, targetText: s.targetText });
      el.textContent = `${s.draftSource}: acceptance length ${s.acceptance.toFixed(3)} tokens per target verification; ${s.tpsDraft.toFixed(1)} tokens/s with the draft, ${s.tpsTarget.toFixed(1)} target alone; ${s.lossless ? 'identical to target-only greedy decoding' : 'DIFFERS from target-only decoding'}`;
      specRun.disabled = false;
      return;
    }
    case 'spec-error': {
      const el = $('spec-stats');
      el.dataset.state = 'error';
      el.textContent = r.message;
      specRun.disabled = false;
      return;
    }
    case 'export-files':
      for (const f of r.files) {
        const a = document.createElement('a');
        a.href = URL.createObjectURL(new Blob([f.bytes as BlobPart], { type: f.name.endsWith('.json') ? 'application/json' : 'application/octet-stream' }));
        a.download = f.name;
        a.click();
        setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
      }
      return;
    case 'import': {
      const el = $('import-status');
      el.dataset.state = r.state;
      el.textContent = r.message;
      if (r.state === 'ready') haveDraft = true;
      refreshButtons();
      return;
    }
    case 'error':
      detail.textContent = r.message;
      detail.dataset.state = 'error';
      return;
  }
}

worker.onmessage = (event: MessageEvent<Report>) => handle(event.data);
worker.onerror = (event) => handle({ type: 'gpu-error', message: `the lab worker failed: ${event.message}` });

buttons.start.addEventListener('click', () => {
  detail.dataset.state = '';
  if (saved && !saved.finished) {
    send({ type: 'continue' });
    return;
  }
  try {
    const settings = readSettings();
    if (settings.tttLength !== tttLength) buildCharts(settings.tttLength);
    for (const c of Object.values(charts)) c.reset();
    showEval(undefined);
    delete status.dataset.firstLoss;
    send({ type: 'start', settings });
  } catch (err) {
    detail.textContent = (err as Error).message;
    detail.dataset.state = 'error';
  }
});
buttons.pause.addEventListener('click', () => send({ type: 'pause' }));
buttons.resume.addEventListener('click', () => send({ type: 'resume' }));
buttons.stop.addEventListener('click', () => send({ type: 'stop' }));
buttons.discard.addEventListener('click', () => {
  haveDraft = false;
  for (const c of Object.values(charts)) c.reset();
  showEval(undefined);
  send({ type: 'discard' });
});
specRun.addEventListener('click', () => {
  $('spec-output').textContent = '';
  const el = $('spec-stats');
  el.dataset.state = 'running';
  el.textContent = 'decoding…';
  specRun.disabled = true;
  send({ type: 'spec-run', prompt: Number($<HTMLSelectElement>('spec-prompt').value || 0), maxNewTokens: 32, numDraftTokens: 3 });
});
const loadPicked = (dir: PickedDirectory) => {
  if (dir.files.length > 0) send({ type: 'load-model-files', files: [...dir.files], folder: dir.folder });
};
const pickModel = (input: HTMLInputElement) => () => {
  if (input.files && input.files.length > 0) loadPicked(pickedDirectory(input.files));
};
$('model-files').addEventListener('change', pickModel($<HTMLInputElement>('model-files')));
$('model-files-flat').addEventListener('change', pickModel($<HTMLInputElement>('model-files-flat')));
$('model-url-load').addEventListener('click', () => {
  const url = $<HTMLInputElement>('model-url').value.trim();
  // Resolved here: inside the worker a relative URL would resolve against the worker script.
  if (url) send({ type: 'load-model-url', url: new URL(url, location.href).href });
});
exportButton.addEventListener('click', () => send({ type: 'export' }));
$('import-files').addEventListener('change', () => {
  const files = $<HTMLInputElement>('import-files').files;
  if (files && files.length > 0) send({ type: 'import', files: [...files] });
});
document.body.addEventListener('dragover', (e) => e.preventDefault());
document.body.addEventListener('drop', (e) => {
  e.preventDefault();
  // The DataTransfer empties once the handler returns: read it before any await.
  if (e.dataTransfer) droppedDirectory(e.dataTransfer).then(loadPicked, (err: Error) => handle({ type: 'model', state: 'error', message: err.message }));
});

send({ type: 'init', labTargetUrl: new URL('lab-target/', document.baseURI).href });
refreshButtons();
