/**
 * EAGLE3 training and evaluation metrics under the keys SpecForge gives its trackers (W&B,
 * TensorBoard, SwanLab, MLflow), so runs of both can share one dashboard. Sources, all at
 * sgl-project/SpecForge a6b6b023 (the commit the fixtures come from):
 *   A  specforge/training/controller.py `_reduce_eagle3_metrics`: per-position numerators and
 *      denominators summed across DP ranks BEFORE any ratio. SpecForge logs the boundary
 *      micro-batch's; `reduceTrainMetrics` sums every micro-batch of the step (TrainerController
 *      adds the strategy's sums), the same ratios-of-sums rule and identical at accumulation 1;
 *   B  specforge/training/controller.py `TrainerController.fit`: the step's metrics plus `lr`,
 *      logged every `log_interval` (default 50) optimizer steps; `_result` adds `grad_norm`;
 *   C  specforge/training/tracking.py `training_metric_names`: a key not starting with `train/` or
 *      `eval/` gets `train/`; `scalar_metrics` expands a list value to `name/index` keys;
 *   D  specforge/eval/evaluator.py `Evaluator.run` (+ `_simulated_acc_len`), float64 sums over the
 *      whole eval set, logged at each `eval_interval`; `eval/simulated_acc_len` is also the default
 *      best-checkpoint metric (specforge/training/checkpoint.py, higher wins).
 * n = B·S (SpecForge's `metric_loss_denoms` entry, one per position), w_b = Σ_k n = L·B·S per batch.
 *
 *   train/loss                  Σ_k 0.8ᵏ · train/ploss_k                                  (A, C)
 *   train/acc                   Σ_k correct_k / max(Σ_k denom_k, 1e-6), pooled over positions (A, C)
 *   train/acc_{k}               Σ correct_k / max(Σ denom_k, 1e-6)                        (A, C)
 *   train/ploss_{k}             Σ ploss_k·n / max(Σ n, 1e-6)                              (A, C)
 *   train/acceptance_rate_{k}   Σ acceptance_rate_k·n / max(Σ n, 1e-6)                    (A, C)
 *   train/acceptance_rate       mean over k of train/acceptance_rate_{k}                  (A, C)
 *   train/lr                    the optimizer's learning rate of the step                 (B, C)
 *   train/grad_norm             the pre-clip global gradient norm                         (B, C)
 *   train/simulated_acc_len     NOT logged by SpecForge's trainer: a SpecLab extension, D's formula
 *                               on the train accuracies
 *   eval/avg_loss               Σ_b loss_b·w_b / max(Σ w_b, 1)  (= Σ_k 0.8ᵏ eval/ploss_k)  (D)
 *   eval/avg_acc                eval/per_position_acc/0                                   (D)
 *   eval/per_position_acc/{k}   Σ correct_k / max(Σ denom_k, 1)  (D's list, expanded by C)  (D, C)
 *   eval/simulated_acc_len      Σ_k Π_{j≤k} acc_j, no bonus token (≈ serving accept length − 1) (D)
 *   eval/acceptance_rate_{k}    Σ_b acceptance_rate_{b,k}·w_b / Σ w_b                     (D)
 *   eval/ploss_{k}              Σ_b ploss_{b,k}·w_b / Σ w_b                               (D)
 * SpecForge has no `eval/acc_{k}`, `eval/loss` or `eval/lr`: the eval record carries only D's keys.
 * The sums behind the train record come from Eagle3TrainStrategy's metrics (strategies/eagle3.ts);
 * the eval record's from src/training/evaluation/held-out-eval.ts `reduceEvalMetrics`.
 */
import { PLOSS_DECAY } from '../../config/eagle3-config.ts';

/** What a train or eval record is made of (ratios already formed from sums). */
export interface SpecForgeMetricValues {
  /** Σ_k 0.8ᵏ ploss_k. */
  loss: number;
  /** Per TTT position k. */
  plosses: readonly number[];
  accs: readonly number[];
  /** Σ_k Π_{j≤k} acc_j. */
  simulatedAcceptance: number;
  /** Accuracy pooled over positions (`train/acc`); train only. */
  acc?: number;
  acceptanceRates?: readonly number[];
  /** Train only. */
  lr?: number;
  /** Train only; NaN (a skipped step) is kept. */
  gradNorm?: number;
}

/** SpecForge's simulated acceptance length: a0 + a0·a1 + a0·a1·a2 + … (evaluator.py `_simulated_acc_len`). */
export function simulatedAcceptLength(accs: readonly number[]): number {
  let cumulative = 1;
  let total = 0;
  for (const a of accs) {
    cumulative *= a;
    total += cumulative;
  }
  return total;
}

/**
 * SpecForge's train reduction (A) of Eagle3TrainStrategy metric sums added over one optimizer
 * step's micro-batches (StepLog.metrics): ratios of sums, never means of ratios.
 */
export function reduceTrainMetrics(metrics: Readonly<Record<string, number>>, tttLength: number): SpecForgeMetricValues {
  if (!Number.isInteger(tttLength) || tttLength < 1)
    throw new RangeError(`reduceTrainMetrics: tttLength must be a positive integer, got ${tttLength}`);
  const get = (key: string): number => {
    const v = metrics[key];
    if (typeof v !== 'number') throw new Error(`reduceTrainMetrics: metric "${key}" is missing (have ${Object.keys(metrics).join(', ')})`);
    return v;
  };
  const ks = Array.from({ length: tttLength }, (_, k) => k);
  const correct = ks.map((k) => get(`correct_${k}`));
  const denom = ks.map((k) => get(`denom_${k}`));
  const n = ks.map((k) => get(`ploss_den_${k}`));
  const plosses = ks.map((k) => get(`ploss_num_${k}`) / Math.max(n[k], 1e-6));
  const accs = ks.map((k) => correct[k] / Math.max(denom[k], 1e-6));
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const values: SpecForgeMetricValues = {
    loss: weightedLoss(plosses),
    plosses,
    accs,
    simulatedAcceptance: simulatedAcceptLength(accs),
    acc: sum(correct) / Math.max(sum(denom), 1e-6),
  };
  if (ks.every((k) => typeof metrics[`accept_rate_num_${k}`] === 'number')) {
    values.acceptanceRates = ks.map((k) => metrics[`accept_rate_num_${k}`] / Math.max(n[k], 1e-6));
  }
  return values;
}

/** Σ_k 0.8ᵏ · ploss_k, SpecForge's total loss (ploss_decay 0.8). */
export function weightedLoss(plosses: readonly number[]): number {
  let total = 0;
  plosses.forEach((p, k) => (total += PLOSS_DECAY ** k * p));
  return total;
}

/** One flat record under SpecForge's keys (the table in the file comment), in a stable key order. */
export function specForgeMetrics(prefix: 'train' | 'eval', v: SpecForgeMetricValues): Record<string, number> {
  const L = v.accs.length;
  if (v.plosses.length !== L) throw new Error(`specForgeMetrics: ${v.plosses.length} plosses for ${L} accuracies`);
  if (v.acceptanceRates && v.acceptanceRates.length !== L)
    throw new Error(`specForgeMetrics: ${v.acceptanceRates.length} acceptance rates for ${L} accuracies`);
  const out: Record<string, number> = {};
  if (prefix === 'eval') {
    out['eval/avg_loss'] = v.loss;
    if (L > 0) out['eval/avg_acc'] = v.accs[0];
    v.accs.forEach((a, k) => (out[`eval/per_position_acc/${k}`] = a));
    out['eval/simulated_acc_len'] = v.simulatedAcceptance;
    v.acceptanceRates?.forEach((r, k) => (out[`eval/acceptance_rate_${k}`] = r));
    v.plosses.forEach((p, k) => (out[`eval/ploss_${k}`] = p));
    return out;
  }
  out['train/loss'] = v.loss;
  if (v.acc !== undefined) out['train/acc'] = v.acc;
  v.accs.forEach((a, k) => (out[`train/acc_${k}`] = a));
  v.plosses.forEach((p, k) => (out[`train/ploss_${k}`] = p));
  if (v.acceptanceRates) {
    v.acceptanceRates.forEach((r, k) => (out[`train/acceptance_rate_${k}`] = r));
    if (L > 0) out['train/acceptance_rate'] = v.acceptanceRates.reduce((a, b) => a + b, 0) / L;
  }
  if (v.lr !== undefined) out['train/lr'] = v.lr;
  if (v.gradNorm !== undefined) out['train/grad_norm'] = v.gradNorm;
  out['train/simulated_acc_len'] = v.simulatedAcceptance;
  return out;
}
