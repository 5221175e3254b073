/**
 * The lab worker's export and import of a draft: the SGLang EAGLE3 export (config.json +
 * model.safetensors) written to the lab's file store and sent to the page, and an export the page
 * hands back (the loose files, or the entries of the page's zip) read into the speculative panel.
 */
import { readEagle3Export, writeEagle3Export } from '../../src/model/eagle3/export.ts';
import { pickedFilesStore } from '../../src/platform/browser-model-files.ts';
import { auxLayersFor, lab, labFiles, post } from './worker-state.ts';

export const EXPORT_FILES = ['config.json', 'model.safetensors'] as const;

export async function exportDraft(): Promise<void> {
  const session = lab.session;
  if (!session) throw new Error('no trained draft to export: start or continue a run first');
  const files = labFiles();
  await writeEagle3Export(
    files,
    'export',
    session.draftConfig,
    await session.currentWeights(),
    { t2d: session.mapping.t2d, d2t: session.mapping.d2t },
    { auxLayerIds: session.auxLayerIds },
  );
  const out = await Promise.all(EXPORT_FILES.map(async (name) => ({ name, bytes: await files.read(`export/${name}`) })));
  post(
    { type: 'export-files', files: out, step: session.globalStep },
    out.map((f) => f.bytes.buffer as ArrayBuffer),
  );
}

export async function importDraft(fileList: File[]): Promise<void> {
  const m = lab.model!;
  try {
    const store = pickedFilesStore(fileList);
    const draft = await readEagle3Export(store, '', 'none');
    const c = draft.config;
    const t = m.config;
    if (c.hiddenSize !== t.hiddenSize || c.vocabSize !== t.vocabSize) {
      throw new Error(
        `the draft (hidden ${c.hiddenSize}, vocab ${c.vocabSize}) does not fit the loaded target ${m.id} (hidden ${t.hiddenSize}, vocab ${t.vocabSize})`,
      );
    }
    lab.imported = {
      draft: {
        config: c,
        weights: draft.values,
        d2t: draft.vocab.d2t,
        auxLayerIds: draft.auxLayerIds ?? auxLayersFor(t.numLayers),
      },
      label: `imported draft (${fileList.map((f) => f.name).join(', ')})`,
    };
    post({
      type: 'import',
      state: 'ready',
      message: `imported: hidden ${c.hiddenSize}, draft vocab ${c.draftVocabSize}; the speculative panel uses it`,
    });
  } catch (err) {
    post({ type: 'import', state: 'error', message: `import refused: ${(err as Error).message}` });
  }
}
