/**
 * Evaluation by speculative decoding (chain drafting, batch 1), as SGLang serves an EAGLE3 draft and
 * as SpecForge's benchmark measures it (docs/eagle3.md §9). Greedy verification by default; with
 * `sampling.temperature` > 0, speculative sampling (the rejection rule of speculative-sampling.ts).
 *
 * Per prompt:
 *   1. The target prefills the prompt with its KV cache, returning the logits and the aux hidden
 *      states (outputs of the aux layers, concatenated, as captured for training) at every position;
 *      its greedy token at the last position is the first new token.
 *   2. Repeat: the proposer drafts k tokens following the accepted sequence (given the aux states of
 *      the positions the target verified since the last round); the target runs ONE forward over
 *      [last accepted token, d1..dk]; the longest prefix with d_i equal to the target's greedy token
 *      at the previous position is accepted, and the target's own next token (the bonus) is appended.
 *      The target cache is rolled back to the accepted length (its cache length is reset; stale rows
 *      are overwritten later), the proposer is told the new accepted positions.
 * Output tokens equal target-only greedy decoding exactly (every emitted token is a target argmax
 * given the accepted prefix).
 *
 * Sampled (temperature > 0): the first token is a draw from the target's distribution p; the
 * proposer samples d_i from the draft's q_i and returns q_i; the same one forward gives p_1..p_{k+1};
 * d_i is accepted with probability min(1, p_i(d_i)/q_i(d_i)), the first rejection draws from
 * norm(max(0, p_i − q_i)), and when all are accepted the bonus is drawn from p_{k+1}. The output is
 * then distributed as target-only sampling with the same temperature / top-k / top-p. One Rng per
 * run (seeded), drawn in a fixed order: a seed reproduces the tokens.
 *
 * Acceptance length = tokens produced by verification forwards / verification forwards
 * = 1 + accepted draft tokens / verifications (the bonus token counts, so a draft that always misses
 * gives 1.0, docs/eagle3.md §9). The first token comes from the prefill and is not counted.
 *
 * This file is the verification loop and its timing against target-only generation; what proposes
 * the drafts (the `DraftProposer` contract and the EAGLE3 draft behind it) is draft-proposer.ts.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { copyStrided } from '../kernels/copy-strided.ts';
import { generate } from '../model/target/generate.ts';
import type { TargetModel } from '../model/target/model.ts';
import { argmax, samplingProbabilities } from '../model/target/sampling.ts';
import { Rng } from '../util/random.ts';
import type { DraftProposer } from './draft-proposer.ts';
import { checkSpeculativeSampling, isSampling, sampleFrom, verifySampled, type SpeculativeSampling } from './speculative-sampling.ts';

export interface SpeculativeOptions {
  readonly maxNewTokens: number;
  /** Draft tokens per verification (k ≥ 1); fewer near maxNewTokens. */
  readonly numDraftTokens: number;
  /** Target aux layer ids (outputs of those decoder layers), concatenated in order. */
  readonly auxLayerIds: readonly number[];
  /** Generation stops after any of these ids (included). */
  readonly eosTokenIds?: readonly number[];
  /** Called after every verification with the tokens it produced (a UI streams output from it). */
  readonly onVerify?: (event: VerifyEvent) => void;
  /**
   * Temperature / top-p / top-k for the target and the draft, and the seed of the run's Rng.
   * Absent or temperature 0: greedy (the output equals target-only greedy decoding).
   */
  readonly sampling?: SpeculativeSampling;
}

/** One verification: `accepted` draft tokens kept, then the target's `bonus` token. */
export interface VerifyEvent {
  readonly prompt: number;
  readonly accepted: readonly number[];
  readonly bonus: number;
  /** The draft tokens this verification checked (`accepted` is their longest kept prefix). */
  readonly drafted?: readonly number[];
  /** The first token after the prompt (from the prefill, before any verification). */
  readonly first?: boolean;
}

export interface SpeculativeResult {
  /** New tokens per prompt. */
  readonly tokens: number[][];
  /** Target verification forwards (prefills excluded). */
  readonly verifications: number;
  /** Draft tokens accepted over all verifications. */
  readonly acceptedDraftTokens: number;
  /** Tokens produced by verifications (= accepted drafts + one bonus per verification). */
  readonly verifiedTokens: number;
  /** verifiedTokens / verifications (1 when nothing was verified). */
  readonly acceptanceLength: number;
  /** Per verification, how many draft tokens were accepted. */
  readonly acceptedPerStep: number[];
  /** Per verification, how many draft tokens were verified (k, fewer near maxNewTokens). */
  readonly draftedPerStep: number[];
}

/** Speculative decoding of each prompt (batch 1, one after another): greedy, or sampled per `options.sampling`. */
export async function speculativeGenerate(
  target: TargetModel,
  proposer: DraftProposer,
  prompts: readonly (readonly number[])[],
  options: SpeculativeOptions,
): Promise<SpeculativeResult> {
  const { maxNewTokens, numDraftTokens: k, auxLayerIds } = options;
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1)
    throw new Error(`speculativeGenerate: maxNewTokens must be a positive integer, got ${maxNewTokens}`);
  if (!Number.isInteger(k) || k < 1) throw new Error(`speculativeGenerate: numDraftTokens must be a positive integer, got ${k}`);
  const numLayers = target.config.numLayers;
  if (auxLayerIds.length === 0) throw new Error('speculativeGenerate: auxLayerIds is empty');
  for (const id of auxLayerIds)
    if (!Number.isInteger(id) || id < 0 || id >= numLayers)
      throw new Error(`speculativeGenerate: aux layer id ${id} outside 0..${numLayers - 1}`);
  const sampling = options.sampling ?? {};
  checkSpeculativeSampling(sampling);
  const sampled = isSampling(sampling);
  if (sampled && !proposer.proposeSampled)
    throw new Error('speculativeGenerate: sampling (temperature > 0) needs a proposer with proposeSampled (the draft distributions q)');
  const rng = new Rng(sampling.seed ?? 0);
  const eos = new Set(options.eosTokenIds ?? []);
  const gpu = target.gpu;
  const V = target.config.vocabSize;
  const hsIndices = [...new Set(auxLayerIds.map((id) => id + 1))];
  const all: number[][] = [];
  const acceptedPerStep: number[] = [];
  const draftedPerStep: number[] = [];
  let verifications = 0;
  let accepted = 0;
  let verifiedTokens = 0;

  for (const [p, prompt] of prompts.entries()) {
    if (prompt.length === 0) throw new Error(`speculativeGenerate: prompt ${p} is empty`);
    const maxLen = prompt.length + maxNewTokens + k + 1;
    const cache = target.createKvCache(1, maxLen);
    const out: number[] = [];
    const tokens = [...prompt];
    let aux: Tensor | undefined;
    await proposer.begin(prompt, maxLen);
    try {
      const pre = await target.extend(cache, prompt, { hiddenStates: hsIndices, logits: 'last' });
      aux = await concatAux(gpu, pre.hiddenStates, auxLayerIds, target.config.hiddenSize, prompt.length);
      const preLogits = (await gpu.read(pre.logits)) as Float32Array;
      gpu.release(pre.logits, ...pre.hiddenStates.values());
      const lastRow = preLogits.subarray(0, V);
      const first = sampled ? sampleFrom(samplingProbabilities(lastRow, sampling), rng) : argmax(lastRow);
      out.push(first);
      tokens.push(first);
      options.onVerify?.({ prompt: p, accepted: [], bonus: first, first: true });
      let done = eos.has(first);
      while (!done && out.length < maxNewTokens) {
        const kEff = Math.min(k, maxNewTokens - out.length - 1);
        let drafts: number[] = [];
        let qRows: Float64Array[] = [];
        if (kEff > 0 && sampled)
          ({ tokens: drafts, probs: qRows } = await proposer.proposeSampled!(tokens, aux, kEff, { options: sampling, rng }));
        else if (kEff > 0) drafts = await proposer.propose(tokens, aux, kEff);
        if (drafts.length !== kEff)
          throw new Error(`speculativeGenerate: the proposer returned ${drafts.length} tokens, ${kEff} were asked for`);
        if (sampled && (qRows.length !== kEff || qRows.some((q) => q.length !== V)))
          throw new Error(
            `speculativeGenerate: the proposer returned ${qRows.length} draft distributions of [${qRows.map((q) => q.length).join(', ')}] entries, ${kEff} of ${V} were needed`,
          );
        gpu.release(aux);
        aux = undefined;
        const base = cache.lengths[0];
        const ver = await target.extend(cache, [tokens[tokens.length - 1], ...drafts], { hiddenStates: hsIndices });
        const logits = (await gpu.read(ver.logits)) as Float32Array;
        // Row i predicts the token after [last, d1..di]: greedy accepts d_{i+1} while it equals that
        // argmax; sampling accepts by the rejection rule (p rows past the first rejection are never built).
        let a = 0;
        let bonus: number;
        if (sampled)
          ({ accepted: a, nextToken: bonus } = verifySampled(
            (i) => samplingProbabilities(logits.subarray(i * V, (i + 1) * V), sampling),
            qRows,
            drafts,
            rng,
          ));
        else {
          bonus = argmax(logits.subarray(0, V));
          while (a < drafts.length && drafts[a] === bonus) {
            a++;
            bonus = argmax(logits.subarray(a * V, (a + 1) * V));
          }
        }
        const allAux = await concatAux(gpu, ver.hiddenStates, auxLayerIds, target.config.hiddenSize, drafts.length + 1);
        gpu.release(ver.logits, ...ver.hiddenStates.values());
        // Keep the aux rows of the accepted positions [last, d1..da].
        aux = gpu.tensor([a + 1, allAux.shape[1]], 'f32', 'spec.aux');
        await copyStrided(gpu, allAux, aux, { rows: a + 1, width: allAux.shape[1] });
        gpu.release(allAux);
        cache.lengths[0] = base + a + 1;
        verifications++;
        accepted += a;
        acceptedPerStep.push(a);
        draftedPerStep.push(drafts.length);
        options.onVerify?.({ prompt: p, accepted: drafts.slice(0, a), bonus, drafted: drafts });
        for (const t of [...drafts.slice(0, a), bonus]) {
          out.push(t);
          tokens.push(t);
          verifiedTokens++;
          if (eos.has(t)) {
            done = true;
            break;
          }
        }
      }
    } finally {
      if (aux) gpu.release(aux);
      proposer.end();
      cache.release(gpu);
    }
    all.push(out);
  }
  return {
    tokens: all,
    verifications,
    acceptedDraftTokens: accepted,
    verifiedTokens,
    acceptanceLength: verifications === 0 ? 1 : verifiedTokens / verifications,
    acceptedPerStep,
    draftedPerStep,
  };
}

/** [rows, A·H]: the aux layers' hidden states (HF index id + 1) side by side, in auxLayerIds order. */
async function concatAux(
  gpu: Gpu,
  hidden: ReadonlyMap<number, Tensor>,
  auxLayerIds: readonly number[],
  H: number,
  rows: number,
): Promise<Tensor> {
  const width = auxLayerIds.length * H;
  const aux = gpu.tensor([rows, width], 'f32', 'spec.aux');
  for (const [i, id] of auxLayerIds.entries()) {
    const hs = hidden.get(id + 1);
    if (!hs) throw new Error(`speculativeGenerate: hidden state ${id + 1} (aux layer ${id}) was not returned`);
    await copyStrided(gpu, hs, aux, { rows, width: H, dstStride: width, dstOffset: i * H });
  }
  return aux;
}

export interface SpeedReport {
  readonly tokens: number;
  readonly seconds: number;
  readonly tokensPerSecond: number;
}

/**
 * Times target-only generation (batch 1 per prompt, like the speculative run): greedy, or sampled
 * with `sampling` (each prompt from an Rng seeded with `sampling.seed`).
 */
export async function timeTargetOnly(
  target: TargetModel,
  prompts: readonly (readonly number[])[],
  maxNewTokens: number,
  now: () => number,
  eosTokenIds?: readonly number[],
  sampling?: SpeculativeSampling,
  /** After each prompt: prompts done so far. */
  onPrompt?: (done: number) => void,
): Promise<{ tokens: number[][]; speed: SpeedReport }> {
  const t0 = now();
  const tokens: number[][] = [];
  for (const prompt of prompts) {
    tokens.push((await generate(target, [prompt], { ...sampling, maxNewTokens, eosTokenIds }))[0]);
    onPrompt?.(tokens.length);
  }
  const seconds = (now() - t0) / 1000;
  target.gpu.trimPool(); // every prompt's length left buffers of its own size (Gpu.trimPool)
  const n = tokens.reduce((s, t) => s + t.length, 0);
  return { tokens, speed: { tokens: n, seconds, tokensPerSecond: n / seconds } };
}

/** Times speculative generation. */
export async function timeSpeculative(
  target: TargetModel,
  proposer: DraftProposer,
  prompts: readonly (readonly number[])[],
  options: SpeculativeOptions,
  now: () => number,
): Promise<{ result: SpeculativeResult; speed: SpeedReport }> {
  const t0 = now();
  const result = await speculativeGenerate(target, proposer, prompts, options);
  const seconds = (now() - t0) / 1000;
  const n = result.tokens.reduce((s, t) => s + t.length, 0);
  return { result, speed: { tokens: n, seconds, tokensPerSecond: n / seconds } };
}
