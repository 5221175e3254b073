/**
 * Evaluation on a fixed held-out set while training, with the semantics of SpecForge's Evaluator
 * (specforge/eval/evaluator.py at sgl-project/SpecForge a6b6b023): every batch runs the strategy's
 * gradient-free `evaluate`, and per-position numerators and denominators are summed over the
 * WHOLE set (JS numbers: float64, exact counts past 2²⁴) before any ratio is formed. Averaging
 * per-batch ratios instead would make the result depend on the batch split.
 *
 * Per batch b with n_b = B·S (its `ploss_den_k`) and SpecForge's token weight w_b = Σ_k n_b
 * (`_token_count`: the sum of `metric_loss_denoms`):
 *   loss    Σ_b loss_b·w_b / max(Σ w_b, 1)           loss_b = Σ_k 0.8ᵏ ploss_{b,k} (eval/avg_loss)
 *   acc_k   Σ_b correct_{b,k} / max(Σ_b denom_{b,k}, 1)                       (eval/per_position_acc)
 *   ploss_k Σ_b ploss_{b,k}·w_b / Σ w_b                                        (eval/ploss_k)
 *   rate_k  Σ_b acceptance_rate_{b,k}·w_b / Σ w_b                              (eval/acceptance_rate_k)
 *   simulated acceptance length Σ_k Π_{j≤k} acc_j (no bonus token)            (eval/simulated_acc_len)
 * An empty set reports nothing (`undefined`, SpecForge's `{}`), never fabricated zeros.
 * `specForgeMetrics('eval', …)` (metric-keys.ts) turns the result into SpecForge's keys.
 *
 * The held-out batches come from `captureHeldOutBatches`: the target's features for a list of token
 * sequences, captured once by the same FeatureSource and collated by the same FeatureDataLoader as
 * training batches (right padding, attention mask, shifted loss mask), then kept resident so each
 * evaluation reuses them; `destroy` releases them. They bypass the ledger: nothing is committed,
 * leased or acked, and the batches carry no refs.
 */
import { makePromptTask, makeTrainBatch, type SampleRef, type TrainBatch } from '../../contracts/index.ts';
import { FeatureDataLoader } from '../../data/feature-dataloader.ts';
import { LocalFeatureStore } from '../../data/local-feature-store.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { toFeaturePrecision, verifyCapture, type CaptureConfig } from '../../inference/capture.ts';
import type { FeatureSource } from '../../inference/rollout-worker.ts';
import { simulatedAcceptLength, type SpecForgeMetricValues } from './metric-keys.ts';
import type { DraftTrainStrategy, StepOutput } from '../loop/strategy.ts';

/** What the evaluator accumulates (float64), one entry per TTT position where indexed. */
export interface EvalSums {
  batches: number;
  /** Σ_b loss_b · w_b and Σ_b w_b. */
  lossNum: number;
  weight: number;
  correct: number[];
  denom: number[];
  /** Σ_b ploss_{b,k} · w_b. */
  plossNum: number[];
  /** Σ_b acceptance_rate_{b,k} · w_b. */
  acceptNum: number[];
}

export interface EvalMetrics extends SpecForgeMetricValues {
  acceptanceRates: number[];
  batches: number;
  /** Σ denom_0: loss-masked tokens scored at TTT position 0. */
  lossTokens: number;
}

export function emptyEvalSums(tttLength: number): EvalSums {
  if (!Number.isInteger(tttLength) || tttLength < 1)
    throw new RangeError(`emptyEvalSums: tttLength must be a positive integer, got ${tttLength}`);
  const zeros = () => new Array<number>(tttLength).fill(0);
  return { batches: 0, lossNum: 0, weight: 0, correct: zeros(), denom: zeros(), plossNum: zeros(), acceptNum: zeros() };
}

/** The TTT length of a strategy metric record: how many `correct_k` it carries. */
export function metricPositions(metrics: Readonly<Record<string, number>>): number {
  let L = 0;
  while (typeof metrics[`correct_${L}`] === 'number') L++;
  if (L === 0)
    throw new Error(
      `held-out eval: the strategy's metrics carry no per-position counts (correct_0; have ${Object.keys(metrics).join(', ')})`,
    );
  return L;
}

/** Adds one batch's total loss and strategy metrics (Eagle3TrainStrategy keys) into `sums`. */
export function addEvalBatch(sums: EvalSums, loss: number, metrics: Readonly<Record<string, number>>): void {
  const L = sums.correct.length;
  const get = (key: string): number => {
    const v = metrics[key];
    if (typeof v !== 'number') throw new Error(`held-out eval: metric "${key}" is missing (have ${Object.keys(metrics).join(', ')})`);
    return v;
  };
  let w = 0;
  for (let k = 0; k < L; k++) w += get(`ploss_den_${k}`);
  sums.batches++;
  sums.lossNum += loss * w;
  sums.weight += w;
  for (let k = 0; k < L; k++) {
    sums.correct[k] += get(`correct_${k}`);
    sums.denom[k] += get(`denom_${k}`);
    sums.plossNum[k] += get(`ploss_${k}`) * w;
    sums.acceptNum[k] += (get(`accept_sum_${k}`) / Math.max(get(`accept_count_${k}`), 1e-8)) * w;
  }
}

/** Ratios of the sums, as Evaluator.run forms them; `undefined` when no batch was evaluated. */
export function reduceEvalMetrics(sums: EvalSums): EvalMetrics | undefined {
  if (sums.batches === 0) return undefined;
  const accs = sums.correct.map((c, k) => c / Math.max(sums.denom[k], 1));
  const w = sums.weight;
  return {
    loss: sums.lossNum / Math.max(w, 1),
    plosses: sums.plossNum.map((p) => (w > 0 ? p / w : 0)),
    accs,
    simulatedAcceptance: simulatedAcceptLength(accs),
    acceptanceRates: sums.acceptNum.map((a) => (w > 0 ? a / w : 0)),
    batches: sums.batches,
    lossTokens: sums.denom[0],
  };
}

function handled(out: StepOutput): void {
  out.loss.catch(() => undefined);
  out.metrics.catch(() => undefined);
}

/** Runs a strategy's `evaluate` over a fixed list of batches (not released: they are reused). */
export class HeldOutEvaluator {
  constructor(
    private readonly strategy: DraftTrainStrategy,
    private readonly batches: readonly TrainBatch<Tensor>[],
  ) {
    if (!strategy.evaluate) throw new Error(`held-out eval: strategy "${strategy.name}" has no forward-only evaluate`);
  }

  /** Encodes every batch, then waits once for all the reads and reduces. */
  async run(): Promise<EvalMetrics | undefined> {
    const outs: StepOutput[] = [];
    try {
      for (const batch of this.batches) {
        this.strategy.validateBatch(batch);
        outs.push(await this.strategy.evaluate!(batch));
      }
    } catch (err) {
      outs.forEach(handled);
      throw err;
    }
    const results = await Promise.all(outs.map(async (o) => ({ loss: await o.loss, metrics: await o.metrics })));
    if (results.length === 0) return undefined;
    const sums = emptyEvalSums(metricPositions(results[0].metrics));
    for (const r of results) addEvalBatch(sums, r.loss, r.metrics);
    return reduceEvalMetrics(sums);
  }
}

export interface HeldOutSequence {
  inputIds: readonly number[];
  /** 0/1 per input id (as TrainSequence.lossMask). */
  lossMask: readonly number[];
}

export interface HeldOutCaptureOptions {
  gpu: Gpu;
  /** The target, as the rollout workers use it (TargetFeatureSource). */
  source: FeatureSource;
  /** The training capture config, e.g. `{ ...eagle3CaptureConfig(tc, auxLayerIds), extra: { ttt_length } }`. */
  capture: CaptureConfig;
  sequences: readonly HeldOutSequence[];
  batchSize: number;
  /** Recorded in every batch's metadata (the strategy refuses a mismatch), as the workers record it. */
  tttLength: number;
  /** Sample ids are `<idPrefix>-<index>`; default `heldout`. */
  idPrefix?: string;
  /** After each captured chunk: sequences captured so far, of all. */
  onProgress?: (done: number, total: number) => void;
}

/** The resident held-out batches; `destroy` releases their tensors. */
export class HeldOutBatches {
  private list: TrainBatch<Tensor>[] | undefined;

  constructor(
    private readonly gpu: Gpu,
    batches: TrainBatch<Tensor>[],
    readonly samples: number,
  ) {
    this.list = batches;
  }

  get batches(): readonly TrainBatch<Tensor>[] {
    if (!this.list) throw new Error('held-out batches used after destroy()');
    return this.list;
  }

  destroy(): void {
    if (!this.list) return;
    for (const b of this.list) this.gpu.release(...Object.values(b.tensors));
    this.list = undefined;
  }
}

/**
 * Captures the target features of `sequences` once, `batchSize` at a time (one source call and one
 * collated batch per chunk, so only one chunk's per-sample tensors exist at a time), in order.
 */
export async function captureHeldOutBatches(o: HeldOutCaptureOptions): Promise<HeldOutBatches> {
  const { gpu, source, capture, sequences } = o;
  if (!Number.isInteger(o.batchSize) || o.batchSize < 1)
    throw new RangeError(`captureHeldOutBatches: batchSize must be a positive integer, got ${o.batchSize}`);
  if (!Number.isInteger(o.tttLength) || o.tttLength < 1)
    throw new RangeError(`captureHeldOutBatches: tttLength must be a positive integer, got ${o.tttLength}`);
  const prefix = o.idPrefix ?? 'heldout';
  const width = String(Math.max(sequences.length - 1, 0)).length;
  const store = new LocalFeatureStore(gpu, { storeId: prefix });
  const batches: TrainBatch<Tensor>[] = [];
  try {
    for (let start = 0; start < sequences.length; start += o.batchSize) {
      const chunk = sequences.slice(start, start + o.batchSize);
      const ids = chunk.map((_, i) => `${prefix}-${String(start + i).padStart(width, '0')}`);
      const tasks = chunk.map((s, i) =>
        makePromptTask(
          {
            taskId: ids[i],
            runId: prefix,
            sourceId: prefix,
            payload: { input_ids: [...s.inputIds], loss_mask: [...s.lossMask] },
            maxLength: s.inputIds.length,
          },
          `held-out sequence ${start + i}`,
        ),
      );
      const captured = await source.generateFeatures(tasks, capture);
      const refs: SampleRef[] = [];
      try {
        try {
          if (captured.length !== tasks.length)
            throw new RangeError(
              `captureHeldOutBatches: the feature source returned ${captured.length} results for ${tasks.length} sequences`,
            );
          for (const [i, c] of captured.entries()) {
            verifyCapture(c.tensors, capture, { sampleId: ids[i], recordedAuxLayerIds: c.auxLayerIds });
            // Kept as the run keeps its training features (f16 with --feature-precision f16): resident
            // for the whole run, a real vocabulary's held-out logits are the larger part of it.
            const tensors = await toFeaturePrecision(gpu, c.tensors, capture.featurePrecision ?? 'f32', ids[i]);
            captured[i] = { ...c, tensors };
            refs.push(
              await store.put(tensors, ids[i], {
                runId: prefix,
                targetRepr: capture.targetRepr,
                vocabMapVersion: capture.vocabMapVersion,
                numTokens: chunk[i].inputIds.length,
                extra: { ttt_length: o.tttLength },
              }),
            );
          }
        } catch (err) {
          // The store owns what it accepted (freed by the aborts below); the rest is still ours.
          for (const c of captured.slice(refs.length)) gpu.release(...Object.values(c.tensors));
          throw err;
        }
        const loader = new FeatureDataLoader(
          gpu,
          store,
          { refs },
          { batchSize: refs.length, dropLast: false, prefetch: false, shuffle: false },
        );
        for await (const b of loader) {
          // Rebuilt without refs: a held-out batch is never acked.
          batches.push(makeTrainBatch({ sampleIds: b.sampleIds, strategy: b.strategy, tensors: b.tensors, metadata: b.metadata }));
        }
        o.onProgress?.(start + chunk.length, sequences.length);
      } finally {
        // The batch holds copies (encoded before this release), so the per-sample tensors go now.
        for (const r of refs) await store.abort(r.sampleId);
      }
    }
  } catch (err) {
    for (const b of batches) gpu.release(...Object.values(b.tensors));
    throw err;
  }
  return new HeldOutBatches(gpu, batches, sequences.length);
}
