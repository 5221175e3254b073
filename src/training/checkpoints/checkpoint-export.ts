/**
 * A training checkpoint as an SGLang draft, or in the speculators format (docs/export.md §5, §7).
 *
 * `eagle3RunExtras` is what every EAGLE3 training checkpoint keeps beside its f32 masters (the online
 * session and offline training both save it): `extra.draftConfig`, the config.json object the export
 * writes (eagle_config with the aux layers included), `extra.auxLayerIds`, `extra.settings` (the
 * run's settings as the trainer got them), `extra.mode`, and t2d/d2t as buffers. A checkpoint is
 * therefore exported alone, without the run's settings or target.
 *
 * `exportRunCheckpoint` takes a run folder (`speclab train --out`: its checkpoints are in
 * `<run>/checkpoints/<runId>-step<N>`), a checkpoints folder or one step folder, and writes the
 * SGLang directory of its latest complete step through src/model/eagle3/export.ts. `speclab train`
 * writes `<out>/draft` with this same function from the run's final checkpoint, so an export of the
 * run folder and the run's own export are the same bytes. The speculators format
 * (src/model/eagle3/export-speculators.ts) also names the verifier: the caller resolves it, from the
 * target the run recorded, and its config is checked against the draft before anything is written.
 */
import type { TensorToWrite } from '../../formats/safetensors-writer.ts';
import type { FileStore } from '../../ports/storage.ts';
import { eagle3ParameterShapes, parseEagle3Config, type Eagle3Config } from '../../config/eagle3-config.ts';
import { checkVocab, eagle3ExportConfig, eagleAuxLayerIds, writeEagle3Export } from '../../model/eagle3/export.ts';
import { writeEagle3SpeculatorsExport, type SpeculatorsVerifier } from '../../model/eagle3/export-speculators.ts';
import { auxLayerServing, auxLayerServingProblems } from '../../model/eagle3/serving-layers.ts';
import type { Eagle3Vocab } from '../../model/eagle3/parameters.ts';
import { COMPLETE_MARKER, loadCheckpoint, parseCheckpointDirName, scanCheckpoints, type CheckpointRef } from './train-checkpoint.ts';

/** Where a run folder keeps its checkpoints. */
export const RUN_CHECKPOINTS_DIR = 'checkpoints';

/** Draft config JSON and vocabulary kept in an EAGLE3 training checkpoint, so it can be exported alone. */
export function eagle3CheckpointExtras(
  draftConfigJson: Readonly<Record<string, unknown>>,
  vocab: Eagle3Vocab,
): { extra: Record<string, unknown>; buffers: Record<string, TensorToWrite> } {
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

/** The config.json object the SGLang export of this draft holds (`writeEagle3Export` with these aux layers). */
export function eagle3DraftConfigJson(config: Eagle3Config, auxLayerIds: readonly number[]): Record<string, unknown> {
  return eagle3ExportConfig(config, auxLayerIds);
}

/** What an EAGLE3 training run records in each of its checkpoints. */
export interface Eagle3RunRecord {
  readonly mode: 'online' | 'offline';
  readonly draftConfig: Eagle3Config;
  readonly auxLayerIds: readonly number[];
  /** The target's decoder layers: what the export checks the aux layers against (serving-layers.ts). */
  readonly targetLayers: number;
  readonly vocab: Eagle3Vocab;
  /** The run's settings as the trainer got them (JSON; undefined members dropped). */
  readonly settings: unknown;
}

/** `saveCheckpoint`'s `extra` and `buffers` for a checkpoint of an EAGLE3 run: the checkpoint is self-contained. */
export function eagle3RunExtras(run: Eagle3RunRecord): { extra: Record<string, unknown>; buffers: Record<string, TensorToWrite> } {
  const { extra, buffers } = eagle3CheckpointExtras(eagle3DraftConfigJson(run.draftConfig, run.auxLayerIds), run.vocab);
  return {
    extra: {
      ...extra,
      auxLayerIds: [...run.auxLayerIds],
      targetLayers: run.targetLayers,
      mode: run.mode,
      settings: JSON.parse(JSON.stringify(run.settings ?? {})) as unknown,
    },
    buffers,
  };
}

const join = (dir: string, name: string): string => (dir === '' ? name : `${dir.replace(/\/+$/, '')}/${name}`);
const shown = (store: FileStore, path: string): string => (path === '' ? store.root : `${store.root}/${path}`);

/**
 * The checkpoint `path` (inside `store`; '' is the store's root) designates:
 *   - a run folder (it has a `checkpoints/` folder with step folders): its latest complete step;
 *   - a folder named `<runId>-step<N>`: that step (refused unless complete);
 *   - any other folder, as a checkpoints folder: its latest complete step.
 * Refused, naming the path, when the folder holds no complete checkpoint or checkpoints of several runs.
 */
export async function resolveRunCheckpoint(store: FileStore, path: string): Promise<CheckpointRef> {
  const dir = path.replace(/\/+$/, '');
  const name = dir.slice(dir.lastIndexOf('/') + 1);
  const runCheckpoints = join(dir, RUN_CHECKPOINTS_DIR);
  const isRun = (await store.list(runCheckpoints)).some((n) => parseCheckpointDirName(n) !== undefined);
  const step = isRun ? undefined : parseCheckpointDirName(name);
  if (step) return { ...step, dir };
  const folder = isRun ? runCheckpoints : dir;
  const { complete, incomplete } = await scanCheckpoints(store, folder);
  const runs = [...new Set(complete.map((r) => r.runId))];
  if (runs.length > 1)
    throw new Error(
      `${shown(store, folder)}: holds checkpoints of ${runs.length} runs (${runs.join(', ')}); name the step folder to export (<run id>-step<N>)`,
    );
  const latest = complete.at(-1);
  if (latest) return latest;
  const partial =
    incomplete.length > 0
      ? `; ${incomplete.length} step folder(s) without a valid ${COMPLETE_MARKER} marker (a save cut short): ${incomplete.map((r) => r.dir.slice(r.dir.lastIndexOf('/') + 1)).join(', ')}`
      : '';
  throw new Error(
    `${shown(store, dir)}: no complete training checkpoint to export (looked for <run id>-step<N> folders with a ${COMPLETE_MARKER} marker in ${shown(store, folder)}${partial})`,
  );
}

/** The formats an export writes: SGLang's directory (the default; vLLM reads it too) or the speculators format. */
export const EXPORT_FORMATS = ['sglang', 'speculators'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** A verifier and the shape of its config.json, which must be the shape of the target the draft trained on. */
export interface ExportVerifier extends SpeculatorsVerifier {
  readonly hiddenSize: number;
  readonly vocabSize: number;
  readonly numLayers: number;
}

export interface ExportAs {
  readonly format: ExportFormat;
  /**
   * speculators: the verifier, given the target the checkpoint's run recorded (`extra.settings.target`;
   * undefined when it recorded none: the lab target, or an older checkpoint).
   */
  readonly verifier?: (recordedTarget: string | undefined) => Promise<ExportVerifier>;
}

/** Proposed tokens per verification when the run recorded no --num-draft-tokens (its default). */
const DEFAULT_SPECULATIVE_TOKENS = 3;

/**
 * Export a training checkpoint folder (`<runId>-step<N>` in `store`) for SGLang, or in the speculators
 * format (`as`), into `out`/`outDir`. The draft config (and with it the aux layers of eagle_config)
 * comes from the checkpoint unless `draftConfigJson` is given; t2d/d2t must be among the checkpoint's buffers.
 */
export async function exportEagle3Checkpoint(
  store: FileStore,
  dir: string,
  out: FileStore,
  outDir: string,
  draftConfigJson?: Readonly<Record<string, unknown>>,
  as: ExportAs = { format: 'sglang' },
): Promise<{ config: Eagle3Config; step: number; serving: ExportServing; verifier?: ExportVerifier }> {
  const name = dir.replace(/\/+$/, '');
  const parsed = parseCheckpointDirName(name.slice(name.lastIndexOf('/') + 1));
  if (!parsed) throw new Error(`${store.root}/${dir}: not a checkpoint folder name (expected <run id>-step<N>)`);
  const loaded = await loadCheckpoint(store, { ...parsed, dir: name });
  const where = `${store.root}/${name}`;
  const saved = loaded.state.extra.draftConfig as Record<string, unknown> | undefined;
  const rawConfig = draftConfigJson ?? saved;
  if (!rawConfig) {
    throw new Error(
      `${where}/state.json: no draft config (extra.draftConfig): the checkpoint was written before checkpoints were self-contained (by an older speclab, or without eagle3RunExtras) and cannot be exported alone; pass the draft config (--draft-config FILE, if the checkpoint holds the t2d/d2t buffers), or export a checkpoint of a run trained with this version`,
    );
  }
  const config = parseEagle3Config(rawConfig, draftConfigJson ? 'draft config' : `${where}/state.json extra.draftConfig`);
  if (loaded.state.contract.strategy !== 'eagle3')
    throw new Error(`${where}: the checkpoint is of strategy "${loaded.state.contract.strategy}", not eagle3`);
  if (draftConfigJson) checkGivenAuxLayers(draftConfigJson, loaded.state.extra, where);
  for (const key of ['t2d', 'd2t']) {
    if (!loaded.weights.has(key))
      throw new Error(
        `${loaded.weights.source}: missing buffer "${key}": the checkpoint was saved without the draft vocabulary (by an older speclab, or without eagle3RunExtras), which the weights do not determine; it cannot be exported`,
      );
  }
  const weights: Record<string, Float32Array> = {};
  for (const [param, shape] of eagle3ParameterShapes(config)) {
    if (!loaded.weights.has(param)) throw new Error(`${loaded.weights.source}: missing weight "${param}" of the EAGLE3 draft`);
    if (loaded.weights.shape(param).join() !== shape.join())
      throw new Error(
        `${loaded.weights.source}: weight "${param}" has shape [${loaded.weights.shape(param)}], the draft config needs [${shape}]`,
      );
    weights[param] = loaded.weights.f32(param);
  }
  const auxLayerIds = eagleAuxLayerIds(rawConfig) ?? (saved ? eagleAuxLayerIds(saved) : undefined);
  const serving = exportServing(auxLayerIds, loaded.state.extra.targetLayers, where);
  const vocab = { t2d: loaded.weights.i32('t2d'), d2t: loaded.weights.i32('d2t') };
  if (as.format === 'sglang') {
    await writeEagle3Export(out, outDir, config, weights, vocab, { auxLayerIds });
    return { config, step: loaded.state.globalStep, serving };
  }
  if (!as.verifier) throw new Error(`${where}: a speculators export names its verifier, and none was given`);
  const settings = (loaded.state.extra.settings ?? {}) as { target?: unknown; numDraftTokens?: unknown };
  const verifier = await as.verifier(typeof settings.target === 'string' ? settings.target : undefined);
  checkVerifier(verifier, config, loaded.state.extra.targetLayers);
  const k = settings.numDraftTokens;
  const speculativeTokens = typeof k === 'number' && Number.isInteger(k) && k > 0 ? k : DEFAULT_SPECULATIVE_TOKENS;
  await writeEagle3SpeculatorsExport(out, outDir, config, weights, vocab, { verifier, speculativeTokens, auxLayerIds });
  return { config, step: loaded.state.globalStep, serving, verifier };
}

/**
 * A given draft config whose aux layers differ from those the checkpoint was trained on would export
 * a draft that the engine feeds other hidden states than it learned from: refused, naming both.
 */
function checkGivenAuxLayers(given: Readonly<Record<string, unknown>>, extra: Readonly<Record<string, unknown>>, where: string): void {
  const givenIds = eagleAuxLayerIds(given);
  const recorded = extra.auxLayerIds;
  const trained =
    Array.isArray(recorded) && recorded.every((x) => Number.isInteger(x)) ? (recorded as number[]) : eagleAuxLayerIds(extra.draftConfig);
  if (givenIds && trained && givenIds.join() !== trained.join())
    throw new Error(
      `draft config: eagle_config.eagle_aux_hidden_state_layer_ids [${givenIds.join(', ')}] differ from the layers ${where} was trained on [${trained.join(', ')}] (state.json extra.auxLayerIds); give a config with those layers, or none`,
    );
}

/** A verifier of another shape than the draft's target would load the draft and feed it the wrong hidden states. */
function checkVerifier(v: ExportVerifier, config: Eagle3Config, targetLayers: unknown): void {
  const differs = (field: string, have: number, want: number) =>
    new Error(
      `verifier ${v.nameOrPath}: its config.json has ${field} ${have}, but the draft was trained on a target with ${want}; name the target it trained on`,
    );
  if (v.hiddenSize !== config.targetHiddenSize) throw differs('hidden_size', v.hiddenSize, config.targetHiddenSize);
  if (v.vocabSize !== config.vocabSize) throw differs('vocab_size', v.vocabSize, config.vocabSize);
  if (typeof targetLayers === 'number' && v.numLayers !== targetLayers) throw differs('num_hidden_layers', v.numLayers, targetLayers);
}

/**
 * Whether SGLang and vLLM serve the export as trained (serving-layers.ts): aux layers they cannot
 * capture are refused where the target has a servable set, and only flagged (`servable: false`, with
 * the reason) for a target too small to have one. A checkpoint that does not record its target's
 * layer count (written before it was kept) is checked for distinct layers only, and only flagged.
 */
export interface ExportServing {
  readonly servable: boolean;
  /** Why not, in one line; absent when servable. */
  readonly warning?: string;
}

function exportServing(auxLayerIds: readonly number[] | undefined, targetLayers: unknown, where: string): ExportServing {
  if (!auxLayerIds) return { servable: true };
  const known = typeof targetLayers === 'number' && Number.isInteger(targetLayers) && targetLayers > 0;
  if (!known) {
    // Only what needs no layer count: three distinct layers.
    const problems = auxLayerServingProblems(auxLayerIds, Number.POSITIVE_INFINITY);
    if (problems.length === 0) return { servable: true };
    const ids = `[${auxLayerIds.join(', ')}]`;
    return {
      servable: false,
      warning: `aux layers ${ids}: ${problems.join('; ')} (the checkpoint does not record its target's layer count)`,
    };
  }
  const verdict = auxLayerServing(auxLayerIds, targetLayers);
  if (!verdict) return { servable: true };
  if (verdict.refuse) throw new Error(`${where}: refused to export: ${verdict.message}`);
  return { servable: false, warning: verdict.message };
}

/**
 * `speclab export`: the SGLang directory (or, with `as`, the speculators one) of the checkpoint `path`
 * designates (a run folder, a checkpoints folder or a step folder: `resolveRunCheckpoint`), written to
 * `out`/`outDir`. `speclab train` writes its final `<out>/draft` with it too, in the SGLang format.
 */
export async function exportRunCheckpoint(
  store: FileStore,
  path: string,
  out: FileStore,
  outDir = '',
  draftConfigJson?: Readonly<Record<string, unknown>>,
  as?: ExportAs,
): Promise<{ config: Eagle3Config; step: number; checkpoint: string; serving: ExportServing; verifier?: ExportVerifier }> {
  const ref = await resolveRunCheckpoint(store, path);
  const exported = await exportEagle3Checkpoint(store, ref.dir, out, outDir, draftConfigJson, as);
  return { ...exported, checkpoint: `${store.root}/${ref.dir}` };
}
