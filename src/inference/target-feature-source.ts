/**
 * The target model as a FeatureSource (the SGLangAdapter role of docs/features.md §8):
 * prompts in, EAGLE3 training features out, all on the GPU.
 *
 * Tasks are sorted by length and packed into groups of at most `maxBatchTokens` padded tokens; each
 * group is one batched forward over right-padded rows with an attention mask. Per task, with
 * x = its input_ids (length L, truncated to the task's maxLength) and the aux layer ids from the
 * capture config (the OUTPUT of decoder layer id = HF hidden_states[id + 1]):
 *
 *   hidden_state  f32 [L, A·H]  the A aux layer outputs concatenated on the last axis, in order
 *   target        f32 [L, V]    logits shifted left by one: row t = logits at position t + 1, last row 0
 *   input_ids     i32 [L]       x shifted left by one: row t = x[t + 1], last 0
 *   loss_mask     i32 [L]       the payload's loss_mask (all ones when absent), NOT shifted, with the
 *                               last position zeroed: its target row is the zero padding, so SpecForge's
 *                               data paths normalise the mask this way per sample (eagle3 fixture,
 *                               facts.json `loss_mask_recipe`)
 *
 * The feature loader right-pads samples and builds the attention mask from their lengths. Only the
 * `logits` target representation is produced for the online path.
 *
 * `captureShards` runs the same grouped forward for offline shards (docs/features.md §3; written by
 * `speclab prepare`) and returns what SpecForge's `prepare_hidden_states.py` stores, UNSHIFTED:
 *
 *   input_ids         i32 [L]       x
 *   loss_mask         i32 [L]       the payload's loss_mask as given (the offline normaliser zeroes the
 *                                   last position at training time, docs/features.md §5)
 *   hidden_state      f32 [L, H]    the target's final hidden state AFTER the final norm, i.e. the exact
 *                                   input of its lm_head (HF hidden_states[N]); the trainer's target
 *                                   head is then lm_head alone
 *   aux_hidden_state  f32 [L, A·H]  as `hidden_state` above for the online path
 */
import type { PromptTask } from '../contracts/index.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { clearRows, copyRows } from '../gpu/tensor-views.ts';
import { copyStrided } from '../kernels/copy-strided.ts';
import type { TargetModelConfig } from '../config/hf-config.ts';
import type { TargetModel } from '../model/target/model.ts';
import { headRowStats } from '../model/target/head-stats.ts';
import { auxLayerServingProblems, hasServableAuxLayers } from '../model/eagle3/serving-layers.ts';
import type { CaptureConfig } from './capture.ts';
import type { CapturedFeatures, FeatureSource } from './rollout-worker.ts';

export const EAGLE3_FEATURE_NAMES = ['input_ids', 'hidden_state', 'target', 'loss_mask'] as const;

/**
 * Compact features (targetRepr 'hidden_state'): `target` is the target's final-normed hidden state
 * [L, Ht] (its lm_head input) instead of the logits [L, V], with the full-vocabulary logsumexp and
 * argmax of each row beside it, so the trainer builds the exact teacher from the lm_head rows of the
 * draft vocabulary alone (kernels/teacher.ts buildTeacherPruned). At 2,048 tokens of an 8B target
 * that is 64 MiB a sample against 549 MiB.
 */
export const EAGLE3_COMPACT_FEATURE_NAMES = ['input_ids', 'hidden_state', 'target', 'target_lse', 'target_tok', 'loss_mask'] as const;

/** The target representations an online capture produces: full logits, or compact features. */
export type OnlineTargetRepr = 'logits' | 'hidden_state';

/**
 * The default capture layers, SpecLab's one rule for every command, the lab and export: SpecForge's
 * `[1, N/2 − 1, N − 4]` (outputs of those decoder layers) where it names three distinct layers that
 * SGLang and vLLM can capture (N ≥ 7: model/eagle3/serving-layers.ts); for 4 to 6 layers, where that
 * rule repeats a layer (SpecForge gives [1, 2, 2] for 6 layers, which a server collapses to two
 * states), three spread over the capturable ones, `[0, (N − 2)/2, N − 2]`; below 4 layers, where no
 * servable set exists, `[0, min(1, N − 1), N − 1]` (first, second, last), so small targets such as the
 * bundled 2-layer lab target train with no flag (their exports are flagged as not servable).
 */
export function defaultAuxLayerIds(numLayers: number): number[] {
  if (!Number.isInteger(numLayers) || numLayers < 1)
    throw new Error(`defaultAuxLayerIds: a target needs at least one layer, got ${numLayers}`);
  if (!hasServableAuxLayers(numLayers)) return [0, Math.min(1, numLayers - 1), numLayers - 1];
  const specForge = [1, Math.floor(numLayers / 2) - 1, numLayers - 4];
  if (auxLayerServingProblems(specForge, numLayers).length === 0) return specForge;
  return [0, Math.floor((numLayers - 2) / 2), numLayers - 2];
}

/** The EAGLE3 capture config for a target: default aux layers unless given; full-vocab logits, or compact features. */
export function eagle3CaptureConfig(
  config: TargetModelConfig,
  auxLayerIds: readonly number[] = defaultAuxLayerIds(config.numLayers),
  targetRepr: OnlineTargetRepr = 'logits',
): CaptureConfig {
  return {
    featureNames: targetRepr === 'logits' ? EAGLE3_FEATURE_NAMES : EAGLE3_COMPACT_FEATURE_NAMES,
    auxLayerIds,
    targetRepr,
    targetHiddenSize: config.hiddenSize,
    targetVocabSize: config.vocabSize,
  };
}

export interface TargetFeatureSourceOptions {
  /** Padded tokens (rows × longest prompt) per batched forward; default captureBatchTokens(config, the device's binding). */
  readonly maxBatchTokens?: number;
}

/** The most tokens one batched capture forward takes, whatever the binding allows. */
export const MAX_CAPTURE_BATCH_TOKENS = 8192;

/**
 * Tokens per batched capture forward: at most MAX_CAPTURE_BATCH_TOKENS, and few enough that every
 * activation of the forward ([tokens, width] f32 for the widest of hidden, q and MLP widths) fits one
 * binding, since the target's layer kernels bind their activations whole (only the logits, which a
 * real vocabulary makes far wider, are split: kernels/linear.ts). A sequence longer than this is
 * still captured alone; the memory plan refuses a run where one sequence's activations do not fit.
 */
export function captureBatchTokens(config: TargetModelConfig, maxBindingBytes: number): number {
  const widest = Math.max(config.hiddenSize, config.numHeads * config.headDim, config.intermediateSize);
  return Math.max(1, Math.min(MAX_CAPTURE_BATCH_TOKENS, Math.floor(maxBindingBytes / (4 * widest))));
}

interface ParsedTask {
  readonly index: number;
  readonly ids: number[];
  readonly lossMask: number[];
}

export class TargetFeatureSource implements FeatureSource {
  /** Batched forwards run so far (one per group). */
  forwards = 0;
  private readonly maxBatchTokens: number;

  constructor(
    readonly model: TargetModel,
    options: TargetFeatureSourceOptions = {},
  ) {
    this.maxBatchTokens = options.maxBatchTokens ?? captureBatchTokens(model.config, model.gpu.maxBindingBytes);
    if (!Number.isInteger(this.maxBatchTokens) || this.maxBatchTokens < 1)
      throw new Error(`TargetFeatureSource: maxBatchTokens must be a positive integer, got ${options.maxBatchTokens}`);
  }

  async generateFeatures(tasks: readonly PromptTask[], capture: CaptureConfig): Promise<CapturedFeatures[]> {
    const c = this.model.config;
    this.checkCapture(capture);
    const parsed = tasks.map((task, index) => parseTask(task, index, c.vocabSize));
    const results: CapturedFeatures[] = new Array(tasks.length);
    // A capture is a phase of its own (training/run/memory-plan-phases.ts): each group starts on an empty pool.
    try {
      for (const group of this.groups(parsed)) {
        // Each group's forward has its own row count (its own chunk sizes): the last group's free buffers go first.
        this.model.gpu.trimPool();
        const features = await this.captureGroup(group, capture.auxLayerIds, capture.targetRepr === 'logits' ? 'online' : 'compact');
        group.forEach((task, i) => (results[task.index] = features[i]));
      }
    } catch (err) {
      for (const r of results) if (r) this.model.gpu.release(...Object.values(r.tensors));
      throw err;
    } finally {
      this.model.gpu.trimPool(); // the forward's buffers, sized by this call's row counts
    }
    return results;
  }

  /**
   * Offline shard features per task (layout in the file comment), from the same batched forward as
   * `generateFeatures`. The caller owns the returned tensors.
   */
  async captureShards(tasks: readonly PromptTask[], auxLayerIds: readonly number[]): Promise<Record<string, Tensor>[]> {
    const c = this.model.config;
    this.checkAuxLayers(auxLayerIds);
    const parsed = tasks.map((task, index) => parseTask(task, index, c.vocabSize));
    const results: Record<string, Tensor>[] = new Array(tasks.length);
    try {
      for (const group of this.groups(parsed)) {
        this.model.gpu.trimPool();
        const features = await this.captureGroup(group, auxLayerIds, 'shard');
        group.forEach((task, i) => (results[task.index] = features[i].tensors));
      }
    } catch (err) {
      for (const r of results) if (r) this.model.gpu.release(...Object.values(r));
      throw err;
    } finally {
      this.model.gpu.trimPool();
    }
    return results;
  }

  private checkCapture(capture: CaptureConfig): void {
    const c = this.model.config;
    if (capture.targetRepr !== 'logits' && capture.targetRepr !== 'hidden_state')
      throw new Error(
        `TargetFeatureSource: target representation "${capture.targetRepr}" is not produced (only "logits" and "hidden_state")`,
      );
    if (capture.targetHiddenSize !== c.hiddenSize)
      throw new Error(
        `TargetFeatureSource: capture targetHiddenSize ${capture.targetHiddenSize} != the target's hidden_size ${c.hiddenSize}`,
      );
    if (capture.targetVocabSize !== undefined && capture.targetVocabSize !== c.vocabSize) {
      throw new Error(`TargetFeatureSource: capture targetVocabSize ${capture.targetVocabSize} != the target's vocab_size ${c.vocabSize}`);
    }
    this.checkAuxLayers(capture.auxLayerIds);
  }

  private checkAuxLayers(auxLayerIds: readonly number[]): void {
    const c = this.model.config;
    if (auxLayerIds.length === 0)
      throw new Error(
        `TargetFeatureSource: capture.auxLayerIds is empty (the EAGLE3 default for this target is [${defaultAuxLayerIds(c.numLayers).join(', ')}])`,
      );
    for (const id of auxLayerIds) {
      if (!Number.isInteger(id) || id < 0 || id >= c.numLayers)
        throw new Error(`TargetFeatureSource: aux layer id ${id} outside 0..${c.numLayers - 1} (the output of decoder layer id)`);
    }
  }

  /** Longest first, packed while rows × longest ≤ maxBatchTokens (a lone longer task forms its own group). */
  private groups(tasks: ParsedTask[]): ParsedTask[][] {
    const sorted = [...tasks].sort((a, b) => b.ids.length - a.ids.length || a.index - b.index);
    const groups: ParsedTask[][] = [];
    let current: ParsedTask[] = [];
    for (const task of sorted) {
      const seq = current.length > 0 ? current[0].ids.length : task.ids.length;
      if (current.length > 0 && (current.length + 1) * seq > this.maxBatchTokens) {
        groups.push(current);
        current = [];
      }
      current.push(task);
    }
    if (current.length > 0) groups.push(current);
    return groups;
  }

  /**
   * One batched forward over a group; `layout` picks the online features (full logits, or compact:
   * the final hidden state with each row's logsumexp and argmax) or the offline shard tensors.
   */
  private async captureGroup(
    group: ParsedTask[],
    auxLayerIds: readonly number[],
    layout: 'online' | 'compact' | 'shard',
  ): Promise<CapturedFeatures[]> {
    const { model } = this;
    const gpu = model.gpu;
    const { hiddenSize: H, vocabSize: V, numLayers: N } = model.config;
    const batch = group.length;
    const seq = group[0].ids.length;
    const ids = new Int32Array(batch * seq);
    const mask = new Int32Array(batch * seq);
    group.forEach((task, b) => {
      ids.set(task.ids, b * seq);
      mask.fill(1, b * seq, b * seq + task.ids.length);
    });
    // Shards and compact features keep the final-normed hidden state (index N) instead of the logits it projects to.
    const hsIndices = [...new Set([...auxLayerIds.map((id) => id + 1), ...(layout === 'online' ? [] : [N])])];
    const out = await model.forward(
      { inputIds: ids, batch, seqLen: seq, attentionMask: mask },
      { hiddenStates: hsIndices, logits: layout === 'online' },
    );
    this.forwards++;
    const made: CapturedFeatures[] = [];
    const stats = layout === 'compact' ? await headRowStats(model, out.hiddenStates.get(N)!, batch * seq) : undefined;
    try {
      const width = auxLayerIds.length * H;
      for (let b = 0; b < batch; b++) {
        const { ids: x, lossMask } = group[b];
        const L = x.length;
        const tensors: Record<string, Tensor> = {};
        made.push({ tensors, auxLayerIds: [...auxLayerIds] });
        const auxName = layout === 'shard' ? 'aux_hidden_state' : 'hidden_state';
        tensors[auxName] = gpu.tensor([L, width], 'f32', auxName);
        for (const [i, id] of auxLayerIds.entries()) {
          const hs = out.hiddenStates.get(id + 1)!;
          await copyStrided(gpu, hs, tensors[auxName], { rows: L, width: H, srcOffset: b * seq * H, dstStride: width, dstOffset: i * H });
        }
        if (layout === 'shard') {
          tensors.hidden_state = gpu.tensor([L, H], 'f32', 'hidden_state');
          await copyStrided(gpu, out.hiddenStates.get(N)!, tensors.hidden_state, { rows: L, width: H, srcOffset: b * seq * H });
          tensors.input_ids = gpu.upload([L], 'i32', x, 'input_ids');
          tensors.loss_mask = gpu.upload([L], 'i32', lossMask, 'loss_mask');
          continue;
        }
        // Row t is position t + 1 (the next token's target; either side may be split into row parts).
        const shifted = (name: string, from: Tensor, shape: number[], dtype: 'f32' | 'i32') => {
          tensors[name] = gpu.tensor(shape, dtype, name);
          copyRows(gpu, from, b * seq + 1, tensors[name], 0, L - 1);
          clearRows(gpu, tensors[name], L - 1, 1);
        };
        if (stats) {
          shifted('target', out.hiddenStates.get(N)!, [L, H], 'f32');
          shifted('target_lse', stats.lse, [L], 'f32');
          shifted('target_tok', stats.tok, [L], 'i32');
        } else shifted('target', out.logits!, [L, V], 'f32');
        tensors.input_ids = gpu.upload([L], 'i32', [...x.slice(1), 0], 'input_ids');
        tensors.loss_mask = gpu.upload([L], 'i32', [...lossMask.slice(0, L - 1), 0], 'loss_mask');
      }
      return made;
    } catch (err) {
      for (const m of made) gpu.release(...Object.values(m.tensors));
      throw err;
    } finally {
      gpu.release(...out.hiddenStates.values(), ...(out.logits ? [out.logits] : []), ...(stats ? [stats.lse, stats.tok] : []));
    }
  }
}

/** Reads `{ input_ids, loss_mask? }` from a task payload, truncated to the task's maxLength. */
function parseTask(task: PromptTask, index: number, vocab: number): ParsedTask {
  const where = `task ${task.taskId}`;
  const raw = task.payload.input_ids;
  if (!Array.isArray(raw) || raw.length === 0) throw new Error(`${where}: payload.input_ids must be a non-empty array of token ids`);
  const ids = raw.map((v, t) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v >= vocab)
      throw new Error(`${where}: payload.input_ids[${t}] = ${JSON.stringify(v)} is not a token id in [0, ${vocab})`);
    return v;
  });
  let lossMask = ids.map(() => 1);
  const rawMask = task.payload.loss_mask;
  if (rawMask !== undefined && rawMask !== null) {
    if (!Array.isArray(rawMask) || rawMask.length !== ids.length)
      throw new Error(`${where}: payload.loss_mask must be an array of ${ids.length} values (one per input id)`);
    lossMask = rawMask.map((v, t) => {
      if (v !== 0 && v !== 1 && v !== true && v !== false)
        throw new Error(`${where}: payload.loss_mask[${t}] = ${JSON.stringify(v)} is not 0/1`);
      return v === 1 || v === true ? 1 : 0;
    });
  }
  const n = Math.min(ids.length, task.maxLength);
  return { index, ids: ids.slice(0, n), lossMask: lossMask.slice(0, n) };
}
