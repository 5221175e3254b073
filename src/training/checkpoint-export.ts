/**
 * A training checkpoint as an SGLang draft: `eagle3CheckpointExtras` is what an EAGLE3 checkpoint
 * keeps beside its f32 masters (the draft config and t2d/d2t), and `exportEagle3Checkpoint` turns
 * such a checkpoint folder into the SGLang directory that src/model/eagle3/export.ts writes.
 */
import type { TensorToWrite } from '../formats/safetensors.ts';
import type { FileStore } from '../ports/storage.ts';
import { eagle3ParameterShapes, parseEagle3Config, type Eagle3Config } from '../config/eagle3-config.ts';
import { checkVocab, writeEagle3Export } from '../model/eagle3/export.ts';
import type { Eagle3Vocab } from '../model/eagle3/parameters.ts';
import { loadCheckpoint } from './train-checkpoint.ts';

/** Draft config JSON and vocabulary kept in an EAGLE3 training checkpoint, so it can be exported alone. */
export function eagle3CheckpointExtras(draftConfigJson: Readonly<Record<string, unknown>>, vocab: Eagle3Vocab): { extra: Record<string, unknown>; buffers: Record<string, TensorToWrite> } {
  const config = parseEagle3Config(draftConfigJson, 'draft config');
  checkVocab(config, vocab, 'checkpoint vocabulary');
  const d2t = BigInt64Array.from(Array.from(vocab.d2t, (x) => BigInt(x)));
  return {
    extra: { draftConfig: { ...draftConfigJson } },
    buffers: {
      t2d: { dtype: 'BOOL', shape: [config.vocabSize], data: Uint8Array.from(vocab.t2d, (x) => (x ? 1 : 0)) },
      d2t: { dtype: 'I64', shape: [config.draftVocabSize], data: new Uint8Array(d2t.buffer) },
    },
  };
}

/**
 * Export a training checkpoint folder (`<runId>-step<N>` in `store`) for SGLang into `out`/`outDir`.
 * The draft config comes from the checkpoint (saved with `eagle3CheckpointExtras`) unless
 * `draftConfigJson` is given; t2d/d2t must be among the checkpoint's buffers.
 */
export async function exportEagle3Checkpoint(store: FileStore, dir: string, out: FileStore, outDir: string, draftConfigJson?: Readonly<Record<string, unknown>>): Promise<{ config: Eagle3Config; step: number }> {
  const name = dir.replace(/\/$/, '');
  const match = /^(.+)-step(0|[1-9][0-9]*)$/.exec(name);
  if (!match) throw new Error(`${store.root}/${dir}: not a checkpoint folder name (expected <run id>-step<N>)`);
  const loaded = await loadCheckpoint(store, { runId: match[1], step: Number(match[2]), dir: name });
  const where = `${store.root}/${name}`;
  const rawConfig = draftConfigJson ?? (loaded.state.extra.draftConfig as Record<string, unknown> | undefined);
  if (!rawConfig) throw new Error(`${where}/state.json: no extra.draftConfig (save the checkpoint with eagle3CheckpointExtras, or pass the draft config)`);
  const config = parseEagle3Config(rawConfig, draftConfigJson ? 'draft config' : `${where}/state.json extra.draftConfig`);
  if (loaded.state.contract.strategy !== 'eagle3') throw new Error(`${where}: the checkpoint is of strategy "${loaded.state.contract.strategy}", not eagle3`);
  const weights: Record<string, Float32Array> = {};
  for (const [param, shape] of eagle3ParameterShapes(config)) {
    if (!loaded.weights.has(param)) throw new Error(`${loaded.weights.source}: missing weight "${param}" of the EAGLE3 draft`);
    if (loaded.weights.shape(param).join() !== shape.join()) throw new Error(`${loaded.weights.source}: weight "${param}" has shape [${loaded.weights.shape(param)}], the draft config needs [${shape}]`);
    weights[param] = loaded.weights.f32(param);
  }
  for (const key of ['t2d', 'd2t']) if (!loaded.weights.has(key)) throw new Error(`${loaded.weights.source}: missing buffer "${key}" (save the checkpoint with eagle3CheckpointExtras)`);
  await writeEagle3Export(out, outDir, config, weights, { t2d: loaded.weights.i32('t2d'), d2t: loaded.weights.i32('d2t') });
  return { config, step: loaded.state.globalStep };
}
