/**
 * The lab worker's training run: the saved run a reloaded tab finds, opening the session (the same
 * loops as `speclab train`), the step loop with pause / stop, and discarding the run.
 * A reloaded tab finds run.json and the ledger, reports the saved run, and `continue` reopens the
 * session, which resumes from the checkpoint of the acked step.
 * The session also scores the draft on the held-out prompts every few steps (./evaluation.ts).
 */
import { Eagle3TrainingSession, sessionSettingsSchema } from '../../src/training/session/eagle3-session.ts';
import { resolveDraftVocabSize } from '../../src/training/sequences/draft-shape.ts';
import type { FileStore } from '../../src/ports/storage.ts';
import { evalEvery, evalReport, labEvaluation } from './evaluation.ts';
import { LAB_ROUND_PROMPTS, type LabSettings, type RunStatus } from './protocol.ts';
import type { MetricPoint } from './metrics.ts';
import type { SavedRun } from './saved-run.ts';
import { readRunMetrics, writeRunMetrics } from './run-metrics.ts';
import { labTrainSequences } from './worker-data.ts';
import { checkRunData, dataSplit } from './worker-conversations.ts';
import type { TrainSequence } from '../../src/contracts/index.ts';
import type { PeriodicEvalSettings } from '../../src/training/evaluation/periodic-eval.ts';
import { afterStep, trainingGate } from './worker-insight.ts';
import {
  auxLayersFor,
  CHECKPOINTS,
  closeSession,
  lab,
  LAB_FILES,
  labFiles,
  ledger,
  LEDGER,
  phase,
  platform,
  post,
  readSavedRun,
  RUN_ID,
  SPILL,
  writeSavedRun,
} from './worker-state.ts';

export async function reportSavedRun(): Promise<void> {
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
  post({
    type: 'saved-run',
    step,
    total: saved.total,
    settings: saved.settings,
    model: saved.model,
    data: saved.data,
    finished: step >= saved.total,
    acked: marker.acked.size,
    committed: await store.committedCount(),
  });
  if (!lab.running) {
    try {
      post({ type: 'history', points: await readRunMetrics(labFiles(), step) });
    } catch (err) {
      // The curves are a view: a damaged metrics file costs the charts, never the run.
      post({ type: 'error', message: `charts not restored: ${(err as Error).message}` });
    }
  }
}

/** The open run's steps so far (restored up to the resumed step), saved at every checkpoint. */
let points: MetricPoint[] = [];

/** Reports a long phase's progress, timed from its first report. */
function progressReporter(task: 'held-out' | 'prompts'): (done: number, total: number) => void {
  const t0 = performance.now();
  return (done, total) => post({ type: 'progress', task, done, total, elapsedMs: performance.now() - t0 });
}

function sessionSettings(s: LabSettings, numLayers: number, trainRows: number) {
  return sessionSettingsSchema.parse({
    epochs: s.epochs,
    roundPrompts: Math.min(LAB_ROUND_PROMPTS, trainRows),
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

/**
 * What the run trains and is scored on: the conversations brought to the tab (their own replies, as
 * `speclab train --data` trains), or the bundled prompts continued by the target.
 */
async function runData(settings: LabSettings): Promise<{ train: TrainSequence[]; evaluation: PeriodicEvalSettings }> {
  const m = lab.model!;
  if (lab.data) {
    const split = dataSplit(lab.data, settings.trainPrompts);
    const every = evalEvery(settings.epochs, split.train.length, settings.batchSize);
    phase('data', `${lab.data.ref.file}: ${split.train.length} conversations to train on, ${split.held.length} held out`);
    return { train: split.train, evaluation: { every, sequences: split.held } };
  }
  if (settings.trainPrompts > m.train.length)
    throw new Error(`training prompts: at most ${m.train.length} are bundled, ${settings.trainPrompts} asked for`);
  phase('data', `${m.heldOut.length} held-out prompts continued by the target for evaluation (${settings.responseLength} tokens each)`);
  const evaluation = await labEvaluation(m.target, m.heldOut, settings, progressReporter('held-out'));
  phase('data', `${settings.trainPrompts} prompts continued by the target (${settings.responseLength} tokens each)`);
  const train = await labTrainSequences(
    platform.files(CHECKPOINTS),
    m.target,
    m.train.slice(0, settings.trainPrompts),
    settings.responseLength,
    progressReporter('prompts'),
  );
  return { train, evaluation };
}

async function openSession(settings: LabSettings): Promise<Eagle3TrainingSession> {
  const m = lab.model!;
  resolveDraftVocabSize(settings.draftVocabSize, m.config.vocabSize, 'draft vocab size');
  const { train, evaluation } = await runData(settings);
  lab.evaluation = evaluation;
  return Eagle3TrainingSession.open({
    gpu: lab.gpu!,
    target: m.target,
    trainSequences: train,
    evaluation,
    settings: sessionSettings(settings, m.config.numLayers, train.length),
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
  return {
    controller: st.controller,
    residentBytes: st.featureStore.residentBytes,
    spillBytes: st.featureStore.spill?.bytesWritten ?? 0,
    round: st.round,
    rounds: st.rounds,
  };
}

export async function start(settings: LabSettings | undefined): Promise<void> {
  if (lab.running) return;
  if (!lab.model || !lab.gpu) throw new Error('no model is loaded');
  lab.running = true;
  lab.pauseRequested = lab.stopRequested = false;
  try {
    let saved = await readSavedRun();
    if (settings) {
      if (saved) throw new Error('a saved run exists: continue it, or discard it before starting a new one');
      if (lab.dataError) throw new Error(`the conversations cannot be used: ${lab.dataError}`);
      saved = { settings, model: lab.model.id, total: 0, data: lab.data?.ref };
    } else if (!saved) {
      throw new Error('no saved run to continue');
    } else if (saved.model !== lab.model.id) {
      throw new Error(`the saved run trains a draft for ${saved.model}, but ${lab.model.id} is loaded`);
    } else {
      checkRunData(saved.data);
    }
    if (!lab.session) {
      lab.session = await openSession(saved.settings);
      points = settings ? [] : await readRunMetrics(labFiles(), lab.session.globalStep).catch(() => []);
    }
    await writeSavedRun({ ...saved, total: lab.session.totalSteps });
    const s = lab.session;
    const savePoints = () =>
      writeRunMetrics(
        labFiles(),
        points.filter((p) => p.step.step <= s.globalStep),
      );
    if (s.resumed) phase('training', `resumed after step ${s.resumed.step}: ${s.resumed.requeued} samples requeued from the spill`);
    else phase('training', '');
    post({ type: 'status', status: await runStatus(s), step: s.globalStep, total: s.totalSteps });
    for (;;) {
      if (lab.stopRequested) {
        await s.flush();
        await savePoints();
        closeSession();
        phase('stopped', 'checkpoint written; press Continue to go on');
        await reportSavedRun();
        return;
      }
      if (lab.pauseRequested) {
        await s.flush();
        await savePoints();
        phase('paused', `after step ${s.globalStep}`);
        await new Promise<void>((resolve) => (lab.wake = resolve));
        if (!lab.stopRequested) phase('training', '');
        continue;
      }
      // Through the insight gate: a draft insight capture never interleaves with an optimizer step.
      const st = await trainingGate(() => s.step());
      if (!st) {
        await savePoints();
        phase('done', `${s.globalStep} steps`);
        post({ type: 'status', status: await runStatus(s), step: s.globalStep, total: s.totalSteps });
        await reportSavedRun();
        return;
      }
      const status = await runStatus(s);
      const point: MetricPoint = {
        step: {
          step: st.globalStep,
          total: st.totalSteps,
          loss: st.loss,
          plosses: st.plosses,
          accs: st.accs,
          simulatedAcceptance: st.simulatedAcceptance,
          tokensPerSecond: st.tokensPerSecond,
          lr: st.lr,
          checkpointed: st.checkpointed,
        },
        status,
        eval: st.eval && lab.evaluation ? evalReport(st.globalStep, lab.evaluation, st.eval) : undefined,
      };
      points = [...points.filter((p) => p.step.step < st.globalStep), point];
      // At a checkpoint, so a reload redraws exactly the steps it continues after.
      if (st.checkpointed) await savePoints();
      post({ type: 'step', step: point.step, status, eval: point.eval });
      await afterStep(s, st.globalStep);
    }
  } finally {
    lab.running = false;
  }
}

async function clearStore(files: FileStore): Promise<void> {
  for (const name of await files.list('')) await files.remove(name);
}

export async function discard(): Promise<void> {
  if (lab.running) throw new Error('stop the run before discarding it');
  closeSession();
  lab.metadata?.close();
  lab.metadata = undefined;
  await platform.deleteKeyValueDatabase(LEDGER);
  for (const root of [CHECKPOINTS, SPILL, LAB_FILES]) await clearStore(platform.files(root));
  phase('idle', 'saved run discarded');
  post({ type: 'no-saved-run' });
}
