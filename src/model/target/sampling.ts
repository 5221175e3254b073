/**
 * Next-token choice from one row of logits, on the CPU (one [vocab] row per sequence per step is
 * read back anyway to decide when to stop).
 *
 *   greedy  (temperature 0): argmax, ties to the lowest id (torch.argmax).
 *   sampled (temperature > 0): softmax(logits / temperature), then optional top-k (keep the k most
 *           likely) and top-p (keep the smallest most-likely set whose mass reaches p, at least one
 *           token; the Hugging Face nucleus rule), renormalise, draw with the caller's seeded Rng.
 * Probabilities are float64. Sorting is stable by (probability desc, id asc), so a seed gives the
 * same draw in every runtime.
 */
import { Rng } from '../../util/random.ts';

export interface SamplingOptions {
  /** 0 (default) = greedy. */
  readonly temperature?: number;
  /** Nucleus mass in (0, 1]; 1 (default) keeps everything. */
  readonly topP?: number;
  /** Keep only the k most likely tokens; 0 (default) = no limit. */
  readonly topK?: number;
}

export function checkSamplingOptions(o: SamplingOptions): void {
  const t = o.temperature ?? 0;
  if (!(Number.isFinite(t) && t >= 0)) throw new Error(`sampling: temperature must be a finite number ≥ 0, got ${o.temperature}`);
  const p = o.topP ?? 1;
  if (!(p > 0 && p <= 1)) throw new Error(`sampling: topP must be in (0, 1], got ${o.topP}`);
  const k = o.topK ?? 0;
  if (!(Number.isInteger(k) && k >= 0)) throw new Error(`sampling: topK must be an integer ≥ 0, got ${o.topK}`);
}

export function argmax(logits: ArrayLike<number>): number {
  let best = 0;
  for (let v = 1; v < logits.length; v++) if (logits[v] > logits[best]) best = v;
  return best;
}

/**
 * The distribution sampling draws from (after temperature, top-k and top-p), as [id, probability]
 * pairs in decreasing probability. Exposed for tests.
 */
export function samplingDistribution(logits: ArrayLike<number>, o: SamplingOptions): [number, number][] {
  checkSamplingOptions(o);
  const t = o.temperature ?? 0;
  if (t === 0) return [[argmax(logits), 1]];
  let max = Number.NEGATIVE_INFINITY;
  for (let v = 0; v < logits.length; v++) {
    if (Number.isNaN(logits[v])) throw new Error(`sampling: logit ${v} is NaN`);
    max = Math.max(max, logits[v]);
  }
  const probs: [number, number][] = [];
  let sum = 0;
  for (let v = 0; v < logits.length; v++) {
    const e = Math.exp((logits[v] - max) / t);
    probs.push([v, e]);
    sum += e;
  }
  for (const p of probs) p[1] /= sum;
  probs.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  let keep = probs.length;
  const k = o.topK ?? 0;
  if (k > 0) keep = Math.min(keep, k);
  const topP = o.topP ?? 1;
  if (topP < 1) {
    let mass = 0;
    for (let i = 0; i < keep; i++) {
      mass += probs[i][1];
      if (mass >= topP) {
        keep = i + 1;
        break;
      }
    }
  }
  const kept = probs.slice(0, Math.max(1, keep));
  const keptMass = kept.reduce((a, p) => a + p[1], 0);
  for (const p of kept) p[1] /= keptMass;
  return kept;
}

/** Picks the next token: greedy at temperature 0, otherwise one draw from `rng`. */
export function sampleToken(logits: ArrayLike<number>, o: SamplingOptions, rng: Rng): number {
  if ((o.temperature ?? 0) === 0) return argmax(logits);
  const dist = samplingDistribution(logits, o);
  const u = rng.next();
  let acc = 0;
  for (const [id, p] of dist) {
    acc += p;
    if (u < acc) return id;
  }
  return dist[dist.length - 1][0];
}

/**
 * The same distribution as `samplingDistribution`, dense: [vocab] float64 probabilities, 0 for the
 * tokens top-k/top-p drop (one-hot on the argmax at temperature 0). Speculative sampling needs
 * p(x) and q(x) by id; without top-k/top-p it skips the sort.
 */
export function samplingProbabilities(logits: ArrayLike<number>, o: SamplingOptions): Float64Array {
  const out = new Float64Array(logits.length);
  if ((o.topK ?? 0) > 0 || (o.topP ?? 1) < 1 || (o.temperature ?? 0) === 0) {
    for (const [id, p] of samplingDistribution(logits, o)) out[id] = p;
    return out;
  }
  checkSamplingOptions(o);
  const t = o.temperature ?? 0;
  let max = Number.NEGATIVE_INFINITY;
  for (let v = 0; v < logits.length; v++) {
    if (Number.isNaN(logits[v])) throw new Error(`sampling: logit ${v} is NaN`);
    max = Math.max(max, logits[v]);
  }
  let sum = 0;
  for (let v = 0; v < logits.length; v++) sum += out[v] = Math.exp((logits[v] - max) / t);
  for (let v = 0; v < logits.length; v++) out[v] /= sum;
  return out;
}
