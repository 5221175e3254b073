/**
 * The lab's Web Worker: owns the GPU device, the target model, the training session and every
 * IndexedDB store, so the page stays responsive while the same loops as `speclab train` run here.
 * This file only dispatches the page's Commands (./protocol.ts) to the modules that do the work:
 *   worker-state.ts   the shared state, the stores, post()
 *   worker-model.ts   WebGPU and the target model
 *   worker-run.ts     the training run, the saved run, discard
 *   worker-spec.ts    speculative decoding with the draft
 *   worker-export.ts  export and import of the draft
 *   worker-conversations.ts  a conversation file brought to the tab
 */
/// <reference lib="webworker" />
import { pickedFilesStore } from '../../src/platform/browser-model-files.ts';
import type { Command } from './protocol.ts';
import { exportDraft, importDraft } from './worker-export.ts';
import { init, loadHubModel, loadModel, modelUrlStore, removeCachedModel } from './worker-model.ts';
import { discard, start } from './worker-run.ts';
import { specRun } from './worker-spec.ts';
import { requestInsight } from './worker-insight.ts';
import { lab, phase, post } from './worker-state.ts';
import { clearData, loadData, setHeldOut } from './worker-conversations.ts';

const scope = self as unknown as DedicatedWorkerGlobalScope;

async function handle(cmd: Command): Promise<void> {
  switch (cmd.type) {
    case 'init':
      return init(cmd.labTargetUrl, cmd.search);
    case 'start':
      return start(cmd.settings);
    case 'continue':
      return start(undefined);
    case 'pause':
      lab.pauseRequested = true;
      return;
    case 'resume':
      lab.pauseRequested = false;
      lab.wake?.();
      return;
    case 'stop':
      lab.stopRequested = true;
      lab.pauseRequested = false;
      lab.wake?.();
      return;
    case 'discard':
      return discard();
    case 'load-model-url':
      return loadModel(modelUrlStore(cmd.url), cmd.url, false);
    case 'load-model-files':
      return loadModel(pickedFilesStore(cmd.files, { label: cmd.folder }), cmd.folder ?? `${cmd.files.length} picked files`, false);
    case 'spec-run':
      try {
        return await specRun(cmd.prompt, cmd.maxNewTokens, cmd.numDraftTokens, cmd.sampling);
      } catch (err) {
        post({ type: 'spec-error', message: (err as Error).message });
        return;
      }
    case 'export':
      return exportDraft();
    case 'import':
      return importDraft(cmd.files);
    case 'insight':
      return requestInsight(cmd.sample, cmd.topK);
    case 'load-data':
      return loadData(cmd.file, cmd.heldOut);
    case 'data-held-out':
      return setHeldOut(cmd.heldOut);
    case 'clear-data':
      return clearData();
    case 'load-model-hub':
      return loadHubModel(cmd.id, cmd.token);
    case 'remove-cached-model':
      return removeCachedModel(cmd.repo);
  }
}

scope.onmessage = (event: MessageEvent<Command>) => {
  handle(event.data).catch((err: unknown) => {
    const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    post({ type: 'error', message });
    if (event.data.type === 'start' || event.data.type === 'continue') phase('error', message);
  });
};
