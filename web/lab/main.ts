/**
 * The lab page (main thread): controls, charts, panels. Every GPU, storage and training call runs in
 * the Web Worker (./worker.ts); this file only sends Commands and renders Reports (./protocol.ts).
 * Its parts: settings-form.ts (validated inputs), lab-charts.ts (the charts), progress-view.ts
 * (progress and ETA), export-zip.ts (the export zip), metrics.ts (a CLI metrics.jsonl).
 */
import { droppedDirectory, pickedDirectory, type PickedDirectory } from '../../src/platform/browser-model-files.ts';
import { expandZips } from './export-zip.ts';
import { offerExport } from './export-panel.ts';
import { LabCharts } from './lab-charts.ts';
import { acceptanceLength, type MetricPoint } from './metrics.ts';
import { showMetricsFile } from './metrics-file.ts';
import { DataPanel } from './data-panel.ts';
import { HubPanel } from './hub-panel.ts';
import { DEFAULT_SETTINGS, type Command, type EvalReport, type Phase, type Report, type RunStatus } from './protocol.ts';
import { RunProgress } from './progress-view.ts';
import { readSettings, SETTING_INPUTS, validateSettings, writeSettings } from './settings-form.ts';
import { handleSpecReport, initSpecPanel } from './spec-panel.ts';
import { renderTttVisibility } from './ttt-visibility.ts';
import { InsightView } from './insight-view.ts';
import { renderMemoryPlan, type MemoryBasis } from './memory-plan-view.ts';

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module' });
const send = (cmd: Command) => worker.postMessage(cmd);

const status = $('status');
const evalStatus = $('eval-status');
const detail = $('run-detail');
const buttons = {
  start: $<HTMLButtonElement>('start'),
  pause: $<HTMLButtonElement>('pause'),
  resume: $<HTMLButtonElement>('resume'),
  stop: $<HTMLButtonElement>('stop'),
  discard: $<HTMLButtonElement>('discard'),
  again: $<HTMLButtonElement>('train-again'),
};
const specRun = $<HTMLButtonElement>('spec-run');
const exportButton = $<HTMLButtonElement>('export');
const progress = new RunProgress($('progress'));
const dataPanel = new DataPanel(send);
const hubPanel = new HubPanel(send);
// Draft insight (insight-view.ts): one held-out sample as the draft sees it, captured in the worker.
const insight = new InsightView($('insight'), (sample, topK) => send({ type: 'insight', sample, topK }));

// ── GPU memory plan (memory-plan-view.ts): beside the settings, redrawn when they or the model change ──
const memoryPlan = document.createElement('div');
memoryPlan.id = 'memory-plan';
memoryPlan.setAttribute('aria-live', 'polite');
$('plan-slot').append(memoryPlan);
let memoryBasis: MemoryBasis | undefined;
let settingsValid = true;
function onSettingsChange(): void {
  settingsValid = validateSettings().length === 0;
  $('settings-error').hidden = settingsValid;
  $('settings-error').textContent = settingsValid ? '' : 'Fix the settings marked above to start a run.';
  renderMemoryPlan(memoryPlan, memoryBasis, readSettings);
  refreshButtons();
}
$('settings').addEventListener('input', onSettingsChange);

// ── charts ──────────────────────────────────────────────────────────────────────────────────────
const charts = new LabCharts((id) => $(id));
function buildCharts(ttt: number): void {
  charts.build(ttt);
  renderTttVisibility($('ttt-visibility'), ttt);
}
buildCharts(DEFAULT_SETTINGS.tttLength);
/** What the charts show: this tab's run, or a metrics.jsonl someone opened. */
function chartSource(source: 'run' | 'file' | 'none', text: string): void {
  const el = $('charts-source');
  el.dataset.source = source;
  el.textContent = text;
}

// ── run state ───────────────────────────────────────────────────────────────────────────────────
let phase: Phase = 'idle';
let modelReady = false;
let saved: { step: number; total: number; finished: boolean } | undefined;
/** The saved run failed its integrity check: only Discard is offered. */
let damagedRun = false;
let haveDraft = false;
let trainAgain = false;

function setStatus(attrs: Record<string, string | number>): void {
  for (const [k, v] of Object.entries(attrs)) status.dataset[k] = String(v);
  const d = status.dataset;
  const loss = d.loss ? `, loss ${Number(d.loss).toFixed(4)}` : '';
  status.textContent = `${d.phase}: step ${d.step}/${d.total}${loss}; samples committed ${d.committed}, durably acked ${d.acked}${d.resumable === 'true' ? ' — a saved run can be continued' : ''}`;
  const bar = $('bar-run');
  bar.dataset.phase = d.phase ?? '';
  bar.textContent =
    d.phase === 'training' || d.phase === 'data'
      ? progress.summary()
      : `${d.phase}${Number(d.total) > 0 ? ` · step ${d.step}/${d.total}` : ''}${d.resumable === 'true' ? ' · saved run can be continued' : ''}`;
}

/** The latest held-out evaluation as text and data attributes (data-step, data-acc-len, data-acc0, data-loss). */
function showEval(e: EvalReport | undefined): void {
  for (const k of Object.keys(evalStatus.dataset)) delete evalStatus.dataset[k];
  if (!e) {
    evalStatus.dataset.state = 'idle';
    evalStatus.textContent = 'Held-out evaluation: not run yet (it runs every few steps and at the last).';
    return;
  }
  const len = acceptanceLength(e.simulatedAcceptance);
  Object.assign(evalStatus.dataset, {
    state: 'done',
    step: String(e.step),
    accLen: String(len),
    acc0: String(e.accs[0] ?? Number.NaN),
    loss: String(e.loss),
    every: String(e.every),
    sequences: String(e.sequences),
    tokens: String(e.lossTokens),
  });
  const rates = e.acceptanceRates.map((r, k) => `k=${k} ${r.toFixed(2)}`).join(', ');
  evalStatus.textContent = `Held-out evaluation after step ${e.step} (${e.sequences} prompts, ${e.lossTokens} tokens, every ${e.every} steps): simulated acceptance length ${len.toFixed(3)} tokens per verification (bonus included), acc k=0 ${(e.accs[0] ?? Number.NaN).toFixed(3)}, acceptance rate per position ${rates}, loss ${e.loss.toFixed(4)}`;
}

function refreshButtons(): void {
  const busy = phase === 'loading' || phase === 'data' || phase === 'training';
  const finished = saved?.finished ?? false;
  const continuing = saved !== undefined && !finished;
  buttons.start.disabled = !modelReady || busy || phase === 'paused' || finished || damagedRun || (!continuing && !settingsValid);
  buttons.start.textContent = continuing ? `Continue (step ${saved!.step} of ${saved!.total})` : 'Start';
  buttons.pause.disabled = phase !== 'training';
  buttons.resume.disabled = phase !== 'paused';
  buttons.stop.disabled = !(phase === 'training' || phase === 'paused' || phase === 'data');
  buttons.discard.disabled = busy || phase === 'paused' || (!saved && !damagedRun);
  buttons.again.hidden = !finished;
  buttons.again.disabled = !modelReady || busy || !settingsValid;
  specRun.disabled = !modelReady || busy || !haveDraft;
  exportButton.disabled = busy || !haveDraft || !saved;
  dataPanel.setLocked(busy || phase === 'paused' || saved !== undefined || damagedRun);
  // A finished run's settings stay editable: they are the next run's (Train again).
  for (const id of Object.values(SETTING_INPUTS)) $<HTMLInputElement>(id).disabled = busy || phase === 'paused' || continuing;
}

function applyStatus(s: RunStatus): void {
  const c = s.controller;
  setStatus({ acked: c.durableAcked, committed: c.samplesCommitted });
  detail.textContent = `round ${s.round}/${s.rounds} · queue ${c.queueDepth} pending, ${c.queueInFlight} in flight · feature store ${(s.residentBytes / 1e6).toFixed(2)} MB on the GPU, ${(s.spillBytes / 1e6).toFixed(2)} MB spilled`;
}

function drawPoint(p: MetricPoint): void {
  if ($('charts-source').dataset.source !== 'run') {
    charts.reset();
    chartSource('run', "This tab's run. Acceptance length counts the bonus token, as SGLang reports it.");
  }
  charts.push(p);
  if (p.eval) showEval(p.eval);
}

function handle(r: Report): void {
  if (handleSpecReport(r, specRun) || dataPanel.handle(r) || hubPanel.handle(r)) return;
  switch (r.type) {
    case 'adapter': {
      const a = r.record;
      const name = `${a.description || a.device || a.vendor} (${a.architecture || 'unknown architecture'}${a.isFallbackAdapter ? ', software fallback' : ''})`;
      $('adapter').textContent =
        `${name}\nfeature level: ${a.featureLevel}\nfeatures: ${a.features.join(', ') || 'none'}\nlimits: ${Object.entries(a.limits)
          .map(([k, v]) => `${k}=${v}`)
          .join(', ')}`;
      $('bar-adapter').textContent = name;
      return;
    }
    case 'gpu-error':
      $('gpu-error').textContent = r.message;
      $('gpu-error').hidden = false;
      $('bar-adapter').textContent = 'no WebGPU';
      return;
    case 'phase':
      phase = r.phase;
      progress.onPhase(r.phase);
      setStatus({ phase: r.phase });
      if (r.detail) detail.textContent = r.detail;
      if (r.phase === 'done' || r.phase === 'paused' || r.phase === 'stopped') haveDraft = true;
      insight.setEnabled(r.phase === 'training' || r.phase === 'paused' || r.phase === 'done');
      refreshButtons();
      return;
    case 'progress':
      progress.onProgress(r);
      setStatus({});
      return;
    case 'saved-run':
      saved = r;
      damagedRun = false;
      haveDraft ||= r.step > 0;
      writeSettings(r.settings);
      if (r.settings.tttLength !== charts.tttLength) buildCharts(r.settings.tttLength);
      setStatus({
        step: r.step,
        total: r.total,
        acked: r.acked,
        committed: r.committed,
        resumable: String(!r.finished && phase !== 'training'),
      });
      onSettingsChange();
      return;
    case 'history': {
      charts.reset();
      chartSource(
        'run',
        r.points.length > 0
          ? `The saved run, restored up to step ${r.points[r.points.length - 1].step.step} (its last checkpoint).`
          : 'The charts fill in as the run trains.',
      );
      for (const p of r.points) drawPoint(p);
      $('charts-source').dataset.restored = String(r.points.length);
      const last = r.points[r.points.length - 1];
      const evals = r.points.filter((p) => p.eval);
      if (last) progress.restored(last.step.step, last.step.total, evals.length, evals[0]?.eval?.every);
      return;
    }
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
      if (trainAgain) {
        trainAgain = false;
        startNew();
      }
      return;
    case 'step': {
      const s = r.step;
      if (s.step === 1 || status.dataset.firstLoss === undefined) setStatus({ firstLoss: s.loss });
      progress.onStep(s.step, s.total, r.eval?.every);
      setStatus({ step: s.step, total: s.total, loss: s.loss, resumable: 'false' });
      applyStatus(r.status);
      drawPoint(r);
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
      $('bar-model').textContent = r.state === 'ready' ? r.message : r.state === 'error' ? `error: ${r.message}` : r.message;
      const bar = $<HTMLProgressElement>('model-progress');
      if (r.total) {
        bar.max = r.total;
        bar.value = r.loaded ?? 0;
      } else if (r.state !== 'loading') {
        bar.max = 1;
        bar.value = r.state === 'ready' ? 1 : 0;
      } else {
        bar.removeAttribute('value');
      }
      if (r.state === 'ready') modelReady = true;
      refreshButtons();
      return;
    }
    case 'memory-basis':
      memoryBasis = r;
      onSettingsChange();
      return;
    case 'prompts': {
      const select = $<HTMLSelectElement>('spec-prompt');
      select.innerHTML = r.heldOut.map((_text, i) => `<option value="${i}"></option>`).join('');
      r.heldOut.forEach((text, i) => (select.options[i].textContent = `${i + 1}. ${text}`));
      insight.setPrompts(r.heldOut);
      return;
    }
    case 'export-files':
      offerExport(r.files, r.step).catch((err: Error) => handle({ type: 'error', message: `export: ${err.message}` }));
      return;
    case 'import': {
      const el = $('import-status');
      el.dataset.state = r.state;
      el.textContent = r.message;
      if (r.state === 'ready') haveDraft = true;
      refreshButtons();
      return;
    }
    case 'insight':
      insight.show(r.insight);
      return;
    case 'error':
      detail.textContent = r.message;
      detail.dataset.state = 'error';
      return;
  }
}

worker.onmessage = (event: MessageEvent<Report>) => handle(event.data);
worker.onerror = (event) => handle({ type: 'gpu-error', message: `the lab worker failed: ${event.message}` });

function startNew(): void {
  try {
    const settings = readSettings();
    if (settings.tttLength !== charts.tttLength) buildCharts(settings.tttLength);
    charts.reset();
    chartSource('run', "This tab's run. Acceptance length counts the bonus token, as SGLang reports it.");
    progress.resetRun();
    showEval(undefined);
    delete status.dataset.firstLoss;
    send({ type: 'start', settings });
  } catch (err) {
    detail.textContent = (err as Error).message;
    detail.dataset.state = 'error';
  }
}

buttons.start.addEventListener('click', () => {
  detail.dataset.state = '';
  if (saved && !saved.finished) send({ type: 'continue' });
  else startNew();
});
buttons.pause.addEventListener('click', () => send({ type: 'pause' }));
buttons.resume.addEventListener('click', () => send({ type: 'resume' }));
buttons.stop.addEventListener('click', () => send({ type: 'stop' }));
function discardRun(): void {
  haveDraft = false;
  charts.reset();
  showEval(undefined);
  send({ type: 'discard' });
}
buttons.discard.addEventListener('click', discardRun);
// A finished run: discard it and start a new one with the settings in the form.
buttons.again.addEventListener('click', () => {
  trainAgain = true;
  discardRun();
});
initSpecPanel(send, specRun);
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
  if (!files || files.length === 0) return;
  expandZips([...files]).then(
    (expanded) => send({ type: 'import', files: expanded }),
    (err: Error) => handle({ type: 'import', state: 'error', message: `import refused: ${err.message}` }),
  );
});

$('metrics-file').addEventListener('change', () => {
  const file = $<HTMLInputElement>('metrics-file').files?.[0];
  if (file) void showMetricsFile(file, charts, chartSource);
});
document.body.addEventListener('dragover', (e) => e.preventDefault());
document.body.addEventListener('drop', (e) => {
  e.preventDefault();
  const files = e.dataTransfer?.files;
  if (files && files.length === 1 && /\.jsonl?$/i.test(files[0].name)) {
    void showMetricsFile(files[0], charts, chartSource);
    return;
  }
  // The DataTransfer empties once the handler returns: read it before any await.
  if (e.dataTransfer)
    droppedDirectory(e.dataTransfer).then(loadPicked, (err: Error) => handle({ type: 'model', state: 'error', message: err.message }));
});

send({ type: 'init', labTargetUrl: new URL('lab-target/', document.baseURI).href, search: location.search });
onSettingsChange();
