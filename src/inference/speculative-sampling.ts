/**
 * The CPU half of speculative SAMPLING (Leviathan et al. 2023, Chen et al. 2023; the rejection rule
 * SGLang and vLLM verify sampled drafts with), pure float64 so it is testable without a GPU.
 *
 * Round with draft tokens d₁..d_k, drafted from the draft's distributions q₁..q_k (each over the
 * target vocabulary, 0 outside the draft vocabulary), and the target's distributions p₁..p_{k+1}
 * from one verification forward (p_i follows the accepted prefix and d₁..d_{i−1}):
 *   for i = 1..k: accept d_i with probability min(1, p_i(d_i) / q_i(d_i)); on the first rejection
 *                 emit one draw from the residual norm(max(0, p_i − q_i)) and stop;
 *   all accepted: emit the bonus, one draw from p_{k+1}.
 * Every emitted token is then distributed exactly as a draw from p_i: P(emit x) = q(x)·min(1, p(x)/q(x))
 * + (1 − Σ_y min(p(y), q(y)))·max(0, p(x) − q(x)) / Σ_y max(0, p(y) − q(y)) = min(p, q)(x) + max(0, p − q)(x)
 * = p(x), because both normalisers equal 1 − Σ min(p, q). So the output is distributed as
 * target-only sampling at the same temperature / top-k / top-p (docs/eagle3.md §9).
 *
 * Random draws come from the caller's one seeded Rng, in a fixed order (draft draws, then one
 * uniform per verified draft token, then one draw for the emitted target token), so a seed gives the
 * same tokens in every runtime given the same logits.
 */
import { checkSamplingOptions, samplingProbabilities, type SamplingOptions } from '../model/target/sampling.ts';
import type { Rng } from '../util/random.ts';

/** Sampling settings of a speculative run: the target's and the draft's (same values), and the seed of its one Rng. */
export interface SpeculativeSampling extends SamplingOptions {
  /** Seed of the run's Rng (default 0). */
  readonly seed?: number;
}

/** Refuses settings `sampleToken` would refuse, and a seed that is not a 32-bit unsigned integer. */
export function checkSpeculativeSampling(s: SpeculativeSampling): void {
  checkSamplingOptions(s);
  const seed = s.seed ?? 0;
  if (!(Number.isInteger(seed) && seed >= 0 && seed <= 0xffffffff))
    throw new Error(`sampling: seed must be an integer in [0, 4294967295], got ${s.seed}`);
}

/** True when the settings ask for sampling (temperature > 0); greedy otherwise. */
export function isSampling(s: SamplingOptions | undefined): boolean {
  return (s?.temperature ?? 0) > 0;
}

/** One draw from dense probabilities (walked in id order; ids of probability 0 are never drawn). */
export function sampleFrom(probs: ArrayLike<number>, rng: Rng): number {
  const u = rng.next();
  let acc = 0;
  let last = -1;
  for (let v = 0; v < probs.length; v++) {
    if (!(probs[v] > 0)) continue;
    acc += probs[v];
    last = v;
    if (u < acc) return v;
  }
  // Rounding can leave the total a hair under 1: u past it falls on the last possible id.
  if (last < 0) throw new Error('sampleFrom: the distribution has no token of positive probability');
  return last;
}

/**
 * The draft's distribution over the target vocabulary: temperature / top-k / top-p applied to the
 * draft logits [D] (the reduced draft vocabulary), each draft id's mass moved to its target id
 * (`toTarget`, d2t), 0 elsewhere.
 */
export function draftProbabilities(
  draftLogits: ArrayLike<number>,
  o: SamplingOptions,
  toTarget: (draftId: number) => number,
  vocab: number,
): Float64Array {
  const dense = samplingProbabilities(draftLogits, o);
  const q = new Float64Array(vocab);
  for (let d = 0; d < dense.length; d++) {
    if (dense[d] === 0) continue;
    const t = toTarget(d);
    if (!(Number.isInteger(t) && t >= 0 && t < vocab))
      throw new Error(`draftProbabilities: draft id ${d} maps to target id ${t}, outside [0, ${vocab})`);
    q[t] += dense[d];
  }
  return q;
}

/**
 * norm(max(0, p − q)), or undefined when p ≤ q everywhere (then p = q up to rounding and a rejection
 * has probability ~0; the caller draws from p, which is that limit).
 */
export function residual(p: ArrayLike<number>, q: ArrayLike<number>): Float64Array | undefined {
  if (p.length !== q.length) throw new Error(`residual: p has ${p.length} entries, q ${q.length}`);
  const r = new Float64Array(p.length);
  let sum = 0;
  for (let v = 0; v < p.length; v++) {
    const d = p[v] - q[v];
    if (d > 0) {
      r[v] = d;
      sum += d;
    }
  }
  if (!(sum > 0)) return undefined;
  for (let v = 0; v < r.length; v++) r[v] /= sum;
  return r;
}

/** Accepts draft token `token` with probability min(1, p(token) / q(token)) (one uniform from `rng`). */
export function acceptDraft(p: ArrayLike<number>, q: ArrayLike<number>, token: number, rng: Rng): boolean {
  const qd = q[token];
  if (!(qd > 0)) throw new Error(`acceptDraft: draft token ${token} has draft probability ${qd}; a drafted token must have q > 0`);
  // u < p/q without the division: u·q < p (always true when p ≥ q, since u < 1).
  return rng.next() * qd < p[token];
}

export interface SampledVerification {
  /** Draft tokens accepted (0..k). */
  readonly accepted: number;
  /** The token after them: a residual draw at the first rejection, else the bonus from p_{k+1}. */
  readonly nextToken: number;
}

/**
 * The rejection rule over one round. `pRows` gives p₁..p_{k+1} (an array, or a function so rows past
 * the first rejection are never computed), `qRows` q₁..q_k, `draftTokens` d₁..d_k.
 */
export function verifySampled(
  pRows: readonly ArrayLike<number>[] | ((i: number) => ArrayLike<number>),
  qRows: readonly ArrayLike<number>[],
  draftTokens: readonly number[],
  rng: Rng,
): SampledVerification {
  const k = draftTokens.length;
  if (qRows.length !== k) throw new Error(`verifySampled: ${qRows.length} draft distributions for ${k} draft tokens`);
  if (typeof pRows !== 'function' && pRows.length !== k + 1)
    throw new Error(`verifySampled: ${pRows.length} target distributions, ${k + 1} needed (one per draft token and the bonus)`);
  const p = typeof pRows === 'function' ? pRows : (i: number) => pRows[i];
  for (let i = 0; i < k; i++) {
    const pi = p(i);
    if (acceptDraft(pi, qRows[i], draftTokens[i], rng)) continue;
    return { accepted: i, nextToken: sampleFrom(residual(pi, qRows[i]) ?? pi, rng) };
  }
  return { accepted: k, nextToken: sampleFrom(p(k), rng) };
}
