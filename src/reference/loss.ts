/**
 * Float64 references for the EAGLE3 teacher, the TTT shift, the soft- and hard-label cross-entropies
 * and the metric sums (docs/eagle3.md §5–§6, fixtures/eagle3/facts.json). Rows are r = b·S + t.
 * These are the oracles the GPU kernels (src/kernels/teacher.ts, loss.ts, metrics.ts) are tested
 * against; they favour clarity over speed.
 */

export interface TeacherRef {
  /** softmax over the draft columns T[r, used], renormalised: [R, D]. */
  p: Float64Array;
  /** exp(T[r, used] − logsumexp_v T[r, v]), not renormalised: [R, D]. */
  pTilde: Float64Array;
  /** argmax_v T[r, v], ties → lowest id: [R]. */
  tok: Int32Array;
  /** t2d[tok[r]] · lossMask[r]: [R]. */
  positionMask: Int32Array;
}

export function teacherRef(
  logits: ArrayLike<number>,
  t2d: ArrayLike<number>,
  used: ArrayLike<number>,
  lossMask: ArrayLike<number>,
  rows: number,
  vocab: number,
): TeacherRef {
  const D = used.length;
  const p = new Float64Array(rows * D);
  const pTilde = new Float64Array(rows * D);
  const tok = new Int32Array(rows);
  const positionMask = new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    const base = r * vocab;
    let best = 0;
    for (let v = 1; v < vocab; v++) if (logits[base + v] > logits[base + best]) best = v;
    const max = logits[base + best];
    let sum = 0;
    for (let v = 0; v < vocab; v++) sum += Math.exp(logits[base + v] - max);
    const lse = max + Math.log(sum);
    let dMax = -Infinity;
    for (let d = 0; d < D; d++) dMax = Math.max(dMax, logits[base + used[d]]);
    let dSum = 0;
    for (let d = 0; d < D; d++) dSum += Math.exp(logits[base + used[d]] - dMax);
    for (let d = 0; d < D; d++) {
      const x = logits[base + used[d]];
      p[r * D + d] = Math.exp(x - dMax) / dSum;
      pTilde[r * D + d] = Math.exp(x - lse);
    }
    tok[r] = best;
    positionMask[r] = t2d[best] !== 0 ? lossMask[r] : 0;
  }
  return { p, pTilde, tok, positionMask };
}

/** Per row of full-vocabulary logits [rows, vocab]: logsumexp and argmax (ties → lowest id); loss/target-stats. */
export function targetStatsRef(logits: ArrayLike<number>, rows: number, vocab: number): { lse: Float64Array; tok: Int32Array } {
  const lse = new Float64Array(rows);
  const tok = new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    const base = r * vocab;
    let best = 0;
    for (let v = 1; v < vocab; v++) if (logits[base + v] > logits[base + best]) best = v;
    let sum = 0;
    for (let v = 0; v < vocab; v++) sum += Math.exp(logits[base + v] - logits[base + best]);
    lse[r] = logits[base + best] + Math.log(sum);
    tok[r] = best;
  }
  return { lse, tok };
}

/**
 * The teacher from compact features (loss/teacher-pruned): `z` [rows, D] the target's logits of the
 * draft tokens, `lse` and `tok` [rows] from the full logits (targetStatsRef). Equals teacherRef of the
 * full logits: p from z alone, p̃ = exp(z − lse), the position mask from tok.
 */
export function teacherPrunedRef(
  z: ArrayLike<number>,
  lse: ArrayLike<number>,
  tok: ArrayLike<number>,
  t2d: ArrayLike<number>,
  lossMask: ArrayLike<number>,
  rows: number,
  D: number,
): Omit<TeacherRef, 'tok'> {
  const p = new Float64Array(rows * D);
  const pTilde = new Float64Array(rows * D);
  const positionMask = new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    let dMax = -Infinity;
    for (let d = 0; d < D; d++) dMax = Math.max(dMax, z[r * D + d]);
    let dSum = 0;
    for (let d = 0; d < D; d++) dSum += Math.exp(z[r * D + d] - dMax);
    for (let d = 0; d < D; d++) {
      p[r * D + d] = Math.exp(z[r * D + d] - dMax) / dSum;
      pTilde[r * D + d] = Math.exp(z[r * D + d] - lse[r]);
    }
    positionMask[r] = tok[r] >= 0 && tok[r] < t2d.length && t2d[tok[r]] !== 0 ? lossMask[r] : 0;
  }
  return { p, pTilde, positionMask };
}

/**
 * The TTT shift (docs/eagle3.md §5, §6): step k reads row (b, t + k) of a per-row tensor, or `pad` when
 * t + k ≥ S — within each sequence, never across batch rows. Teacher pads: p = 1/D, p̃ = 0, tok = 0;
 * masks are zero-filled.
 */
export function shiftRowsRef(x: ArrayLike<number>, rows: number, width: number, seqLen: number, step: number, pad: number): Float64Array {
  const out = new Float64Array(rows * width);
  for (let r = 0; r < rows; r++) {
    const t = r % seqLen;
    for (let j = 0; j < width; j++) out[r * width + j] = t + step < seqLen ? x[(r + step) * width + j] : pad;
  }
  return out;
}

export interface SoftCrossEntropyRef {
  /** (1/denominator) · Σ_r m[r] · CE[r]  (SpecForge's ploss_k with denominator = B·S). */
  loss: number;
  /** d(gradScale · loss)/dz: m[r]·gradScale/denominator · (Σp · softmax(z[r]) − p[r]). */
  grad: Float64Array;
}

/** Soft-target cross-entropy with row mask, rows already aligned (shift p and m first). */
export function softCrossEntropyRef(
  z: ArrayLike<number>,
  p: ArrayLike<number>,
  mask: ArrayLike<number>,
  rows: number,
  D: number,
  denominator = rows,
  gradScale = 1,
): SoftCrossEntropyRef {
  let loss = 0;
  const grad = new Float64Array(rows * D);
  for (let r = 0; r < rows; r++) {
    if (mask[r] === 0) continue;
    const base = r * D;
    const lse = logSumExp(z, base, D);
    let ce = 0;
    let pSum = 0;
    for (let v = 0; v < D; v++) {
      ce -= p[base + v] * (z[base + v] - lse);
      pSum += p[base + v];
    }
    loss += mask[r] * ce;
    const g = (mask[r] * gradScale) / denominator;
    for (let v = 0; v < D; v++) grad[base + v] = g * (pSum * Math.exp(z[base + v] - lse) - p[base + v]);
  }
  return { loss: loss / denominator, grad };
}

export interface HardCrossEntropyRef {
  /** Σ over rows with a label in [0, V) of −log_softmax(x[r])[label] / denominator. */
  loss: number;
  /** Rows with a non-negative label. */
  count: number;
  grad: Float64Array;
}

/** Hard-label cross-entropy; label −1 (any negative) ignores the row. denominator defaults to the count. */
export function hardCrossEntropyRef(
  x: ArrayLike<number>,
  labels: ArrayLike<number>,
  rows: number,
  vocab: number,
  denominator?: number,
  gradScale = 1,
): HardCrossEntropyRef {
  let count = 0;
  for (let r = 0; r < rows; r++) if (labels[r] >= 0) count++;
  const den = denominator ?? Math.max(count, 1);
  let loss = 0;
  const grad = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    const label = labels[r];
    if (label < 0) continue;
    if (label >= vocab) throw new Error(`hardCrossEntropyRef: labels[${r}] = ${label} is outside [0, ${vocab})`);
    const base = r * vocab;
    const lse = logSumExp(x, base, vocab);
    loss += lse - x[base + label];
    for (let v = 0; v < vocab; v++) grad[base + v] = (gradScale / den) * (Math.exp(x[base + v] - lse) - (v === label ? 1 : 0));
  }
  return { loss: loss / den, count, grad };
}

export interface MetricSumsRef {
  /** Σ ℓ[r] · 1[used[argmax z[r]] == tok[r]]. */
  correct: number;
  /** Σ ℓ[r]. */
  denom: number;
  /** Σ m[r] · Σ_v min(p̃[r,v], softmax(z[r])_v). */
  acceptSum: number;
  /** Σ m[r]. */
  acceptCount: number;
}

/** Metric sums over already-aligned rows (ℓ = loss mask, m = position mask). */
export function metricSumsRef(
  z: ArrayLike<number>,
  pTilde: ArrayLike<number>,
  tok: ArrayLike<number>,
  lossMask: ArrayLike<number>,
  positionMask: ArrayLike<number>,
  used: ArrayLike<number>,
  rows: number,
): MetricSumsRef {
  const D = used.length;
  const out: MetricSumsRef = { correct: 0, denom: 0, acceptSum: 0, acceptCount: 0 };
  for (let r = 0; r < rows; r++) {
    const base = r * D;
    let best = 0;
    for (let v = 1; v < D; v++) if (z[base + v] > z[base + best]) best = v;
    if (used[best] === tok[r]) out.correct += lossMask[r];
    out.denom += lossMask[r];
    if (positionMask[r] === 0) continue;
    const lse = logSumExp(z, base, D);
    let alpha = 0;
    for (let v = 0; v < D; v++) alpha += Math.min(pTilde[base + v], Math.exp(z[base + v] - lse));
    out.acceptSum += positionMask[r] * alpha;
    out.acceptCount += positionMask[r];
  }
  return out;
}

export interface Eagle3StepRef extends MetricSumsRef {
  ploss: number;
  /** acc_k = correct / max(denom, 1e-6). */
  acc: number;
  /** acceptance_rate_k = acceptSum / max(acceptCount, 1e-8). */
  acceptanceRate: number;
}

/** One TTT step k from the step-0 teacher and the step's draft logits, exactly as SpecForge reports it. */
export function eagle3StepRef(
  teacher: TeacherRef,
  z: ArrayLike<number>,
  lossMask: ArrayLike<number>,
  used: ArrayLike<number>,
  rows: number,
  seqLen: number,
  step: number,
): Eagle3StepRef {
  const D = used.length;
  const p = shiftRowsRef(teacher.p, rows, D, seqLen, step, 1 / D);
  const pTilde = shiftRowsRef(teacher.pTilde, rows, D, seqLen, step, 0);
  const tok = shiftRowsRef(teacher.tok, rows, 1, seqLen, step, 0);
  const lm = shiftRowsRef(lossMask, rows, 1, seqLen, step, 0);
  const pm = shiftRowsRef(teacher.positionMask, rows, 1, seqLen, step, 0);
  const { loss } = softCrossEntropyRef(z, p, pm, rows, D);
  const sums = metricSumsRef(z, pTilde, tok, lm, pm, used, rows);
  return {
    ...sums,
    ploss: loss,
    acc: sums.correct / Math.max(sums.denom, 1e-6),
    acceptanceRate: sums.acceptSum / Math.max(sums.acceptCount, 1e-8),
  };
}

function logSumExp(x: ArrayLike<number>, base: number, n: number): number {
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, x[base + i]);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.exp(x[base + i] - max);
  return max + Math.log(sum);
}
