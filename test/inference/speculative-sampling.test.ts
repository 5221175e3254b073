/**
 * Speculative sampling's rejection rule (src/inference/speculative-sampling.ts), on the CPU:
 *   - the rule's pieces: dense sampling probabilities equal samplingDistribution, the draft's
 *     distribution moves through d2t and is 0 outside the draft vocabulary, one-hot p and q give
 *     the greedy rule, a drafted token of q = 0 is refused;
 *   - exactly: the emitted token's distribution (accept mass min(p, q) + rejection mass × residual)
 *     equals p to 1e-12 for every context of a small bigram target;
 *   - statistically: seeded speculative rounds (k = 3) over an 8-token bigram target with a 6-token
 *     draft vocabulary and a draft that is often wrong; the 1st token, the (1st, 2nd) pair and the
 *     3rd token emitted match target-only sampling (chi-square goodness of fit, p-value > 0.01) at
 *     temperature 0.7 and at 1.3 with top-k 5 and top-p 0.9 — while the same rounds with a WRONG
 *     residual (a draw from p instead of norm(max(0, p − q)) on rejection) are rejected (p < 1e-6),
 *     so the test has power. Fixed seeds: deterministic.
 * And on the GPU, with the lab target (assets/lab-target) and a freshly initialised EAGLE3 draft
 * over a 512-token draft vocabulary (d2t: draft id i → target id 2i): speculativeGenerate at
 * temperature 0 equals greedy `generate`; sampled runs are seed-reproducible (another seed gives
 * other tokens), their onVerify events rebuild the output, at temperature 20 some of the draft's
 * tokens are accepted; and a proposer whose q is the target's own p accepts every draft (acceptance
 * length exactly k + 1), which holds only if each p_i is read from the verification row that
 * follows d_1..d_{i−1}.
 */
import { loadHfCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import { Eagle3Drafter } from '../../src/inference/eagle3-drafter.ts';
import { Eagle3Proposer, type DraftProposer, type DraftSampler, type SampledProposal } from '../../src/inference/draft-proposer.ts';
import { speculativeGenerate, type VerifyEvent } from '../../src/inference/speculative.ts';
import { defaultAuxLayerIds } from '../../src/inference/target-feature-source.ts';
import { parseEagle3Config } from '../../src/config/eagle3-config.ts';
import { initialEagle3Weights } from '../../src/model/eagle3/parameters.ts';
import { generate } from '../../src/model/target/generate.ts';
import { TargetModel } from '../../src/model/target/model.ts';
import { repoAssets } from '../corpus/conversations.test.ts';
import {
  acceptDraft,
  draftProbabilities,
  residual,
  sampleFrom,
  verifySampled,
  type SampledVerification,
} from '../../src/inference/speculative-sampling.ts';
import { samplingDistribution, samplingProbabilities, type SamplingOptions } from '../../src/model/target/sampling.ts';
import { Rng } from '../../src/util/random.ts';
import { chiSquareGoodnessOfFit } from '../../src/util/statistics.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertRelClose, assertThrows } from '../harness/assert.ts';
import { defineSuite, type TestContext } from '../harness/suite.ts';

const V = 8;
/** Draft id → target id (d2t offsets folded in): targets 3 and 6 are outside the draft vocabulary. */
const DRAFT_TO_TARGET = [0, 1, 2, 4, 5, 7];
const K = 3;
const TRIALS = 20_000;
const START = 0;

/** A bigram target p(·|c) and draft q(·|c) from fixed random logits under one sampling setting. */
function bigram(o: SamplingOptions): { P: Float64Array[]; Q: Float64Array[] } {
  const rng = new Rng(2024);
  const targetLogits = Array.from({ length: V }, () => rng.floats(V, 2.5));
  // The draft's logits: half the target's (on its vocabulary) plus as much noise, so it is often wrong.
  const draftLogits = targetLogits.map((row) => DRAFT_TO_TARGET.map((t) => 0.5 * row[t] + rng.uniform(-2, 2)));
  const P = targetLogits.map((row) => samplingProbabilities(row, o));
  const Q = draftLogits.map((row) => draftProbabilities(row, o, (d) => DRAFT_TO_TARGET[d], V));
  return { P, Q };
}

type Verify = (pRows: Float64Array[], qRows: Float64Array[], drafts: number[], rng: Rng) => SampledVerification;

/** The deliberately wrong rule: same acceptance, but a rejection draws from p instead of the residual. */
const wrongResidual: Verify = (pRows, qRows, drafts, rng) => {
  for (let i = 0; i < drafts.length; i++) {
    if (!acceptDraft(pRows[i], qRows[i], drafts[i], rng)) return { accepted: i, nextToken: sampleFrom(pRows[i], rng) };
  }
  return { accepted: drafts.length, nextToken: sampleFrom(pRows[drafts.length], rng) };
};

/**
 * Speculative rounds from START until 3 tokens are emitted, TRIALS times: the histograms of the 1st,
 * (1st, 2nd) and 3rd tokens, and the acceptance rate of verified draft tokens.
 */
function simulate(
  P: Float64Array[],
  Q: Float64Array[],
  verify: Verify,
  seed: number,
): { first: number[]; pair: number[]; third: number[]; acceptRate: number } {
  const rng = new Rng(seed);
  const first = new Array<number>(V).fill(0);
  const pair = new Array<number>(V * V).fill(0);
  const third = new Array<number>(V).fill(0);
  let accepted = 0;
  let rejected = 0;
  for (let trial = 0; trial < TRIALS; trial++) {
    const out: number[] = [];
    let c = START;
    while (out.length < 3) {
      const drafts: number[] = [];
      for (let i = 0; i < K; i++) drafts.push(sampleFrom(Q[i === 0 ? c : drafts[i - 1]], rng));
      const pRows = [P[c], ...drafts.map((d) => P[d])];
      const qRows = [Q[c], ...drafts.slice(0, K - 1).map((d) => Q[d])];
      const r = verify(pRows, qRows, drafts, rng);
      out.push(...drafts.slice(0, r.accepted), r.nextToken);
      accepted += r.accepted;
      if (r.accepted < K) rejected++;
      c = out[out.length - 1];
    }
    first[out[0]]++;
    pair[out[0] * V + out[1]]++;
    third[out[2]]++;
  }
  return { first, pair, third, acceptRate: accepted / (accepted + rejected) };
}

/** Target-only sampling from START, exactly: P(x₁), P(x₁, x₂), P(x₃). */
function targetOnly(P: Float64Array[]): { first: number[]; pair: number[]; third: number[] } {
  const first = Array.from(P[START]);
  const pair = Array.from({ length: V * V }, (_, i) => first[Math.floor(i / V)] * P[Math.floor(i / V)][i % V]);
  const second = Array.from({ length: V }, (_, x) => first.reduce((s, f, a) => s + f * P[a][x], 0));
  const third = Array.from({ length: V }, (_, x) => second.reduce((s, f, a) => s + f * P[a][x], 0));
  return { first, pair, third };
}

const SETTINGS: { name: string; o: SamplingOptions }[] = [
  { name: 'temperature 0.7', o: { temperature: 0.7 } },
  { name: 'temperature 1.3, top-k 5, top-p 0.9', o: { temperature: 1.3, topK: 5, topP: 0.9 } },
];

export default defineSuite('inference/speculative-sampling', (t) => {
  t.test('pieces: dense probabilities, d2t mapping, greedy limit, refusals', () => {
    const logits = new Rng(5).floats(12, 3);
    for (const o of [{ temperature: 0.8 }, { temperature: 1.2, topK: 4 }, { temperature: 1, topP: 0.7 }]) {
      const dense = samplingProbabilities(logits, o);
      const want = new Float64Array(12);
      for (const [id, p] of samplingDistribution(logits, o)) want[id] = p;
      assertRelClose(dense, want, 1e-14, `dense = samplingDistribution (${JSON.stringify(o)})`);
    }
    const q = draftProbabilities([0, 1, 2], { temperature: 1 }, (d) => [5, 0, 3][d], 6);
    const z = Math.exp(0) + Math.exp(1) + Math.exp(2);
    assertRelClose(q, [Math.exp(1) / z, 0, 0, Math.exp(2) / z, 0, 1 / z], 1e-14, 'q by target id, 0 outside the draft vocabulary');
    assertThrows(
      () => draftProbabilities([0, 1], { temperature: 1 }, () => 9, 6),
      /draft id 0 maps to target id 9, outside \[0, 6\)/,
      'a d2t id outside the vocabulary',
    );
    // One-hot p and q (temperature 0 on both): accept while the draft is the target's argmax, then the argmax.
    const oneHot = (i: number) => Float64Array.from({ length: 4 }, (_, v) => (v === i ? 1 : 0));
    const rng = new Rng(1);
    assertDeepEqual(
      verifySampled([oneHot(2), oneHot(1), oneHot(3)], [oneHot(2), oneHot(0)], [2, 0], rng),
      { accepted: 1, nextToken: 1 },
      'greedy limit: reject at the first mismatch, emit the argmax',
    );
    assertDeepEqual(
      verifySampled([oneHot(2), oneHot(1), oneHot(3)], [oneHot(2), oneHot(1)], [2, 1], rng),
      { accepted: 2, nextToken: 3 },
      'greedy limit: all accepted, bonus = the last argmax',
    );
    assertEqual(residual([0.5, 0.5], [0.5, 0.5]), undefined, 'p = q: no residual (a rejection has probability 0)');
    assertThrows(() => acceptDraft([0.5, 0.5], [1, 0], 1, rng), /draft token 1 has draft probability 0/, 'a drafted token of q = 0');
    assertThrows(() => verifySampled([oneHot(0)], [oneHot(0)], [0], rng), /1 target distributions, 2 needed/, 'missing bonus row');
  });

  t.test('exact: min(p, q) + (1 − Σ min(p, q)) · residual equals p for every context', () => {
    for (const { name, o } of SETTINGS) {
      const { P, Q } = bigram(o);
      for (let c = 0; c < V; c++) {
        const p = P[c];
        const q = Q[c];
        const r = residual(p, q) ?? p;
        const kept = Array.from(p, (pv, v) => Math.min(pv, q[v]));
        const reject = 1 - kept.reduce((a, b) => a + b, 0);
        assertRelClose(
          kept.map((m, v) => m + reject * r[v]),
          p,
          1e-12,
          `${name}, context ${c}`,
        );
      }
    }
  });

  t.test('statistical: emitted tokens match target-only sampling (chi-square); a wrong residual is rejected', (ctx) => {
    const minP = 0.01;
    for (const [s, { name, o }] of SETTINGS.entries()) {
      const { P, Q } = bigram(o);
      const want = targetOnly(P);
      const got = simulate(P, Q, verifySampled, 100 + s);
      assert(
        got.acceptRate > 0.15 && got.acceptRate < 0.85,
        `${name}: the draft is often wrong but not always (acceptance rate ${got.acceptRate})`,
      );
      ctx.note(`${name}: draft acceptance rate`, Number(got.acceptRate.toFixed(4)));
      for (const which of ['first', 'pair', 'third'] as const) {
        const fit = chiSquareGoodnessOfFit(got[which], want[which]);
        ctx.note(`${name}: ${which} chi2 (df ${fit.df})`, `${fit.statistic.toFixed(3)}, p = ${fit.pValue.toFixed(4)}`);
        assert(
          fit.pValue > minP,
          `${name}: ${which} token(s) distributed as target-only sampling (chi2 ${fit.statistic}, df ${fit.df}, p-value ${fit.pValue} ≤ ${minP})`,
        );
      }
      const wrong = simulate(P, Q, wrongResidual, 100 + s);
      const fit = chiSquareGoodnessOfFit(wrong.first, want.first);
      ctx.note(`${name}: WRONG residual, first chi2 (df ${fit.df})`, `${fit.statistic.toFixed(1)}, p = ${fit.pValue.toExponential(2)}`);
      assert(fit.pValue < 1e-6, `${name}: sampling from p on rejection is detected (chi2 ${fit.statistic}, p-value ${fit.pValue})`);
    }
  });

  t.test(
    'GPU, lab target + a fresh draft: temperature 0 = greedy, seeded sampling reproducible, q = p accepts all',
    async (ctx) => {
      const { target, drafter, gpu } = await labTargetAndDraft(ctx);
      const auxLayerIds = defaultAuxLayerIds(target.config.numLayers);
      const prompts = [
        [2045, 17, 301, 5, 88],
        [2045, 640, 12, 9, 1500, 33, 7],
      ];
      const k = 3;
      const maxNewTokens = 13; // 1 + 3·(k + 1): whole rounds when every draft is accepted
      try {
        const greedy = await Promise.all(prompts.map(async (p) => (await generate(target, [p], { maxNewTokens }))[0]));
        const base = { maxNewTokens, numDraftTokens: k, auxLayerIds };
        const t0 = await speculativeGenerate(target, new Eagle3Proposer(drafter), prompts, {
          ...base,
          sampling: { temperature: 0, topK: 5, seed: 3 },
        });
        assertDeepEqual(t0.tokens, greedy, 'temperature 0: speculative tokens equal greedy generate');

        const sampling = { temperature: 0.9, topK: 64, seed: 7 };
        const events: VerifyEvent[] = [];
        const a = await speculativeGenerate(target, new Eagle3Proposer(drafter), prompts, {
          ...base,
          sampling,
          onVerify: (e) => events.push(e),
        });
        const b = await speculativeGenerate(target, new Eagle3Proposer(drafter), prompts, { ...base, sampling });
        const c = await speculativeGenerate(target, new Eagle3Proposer(drafter), prompts, { ...base, sampling: { ...sampling, seed: 8 } });
        assertDeepEqual(b.tokens, a.tokens, 'same seed: same tokens');
        assertDeepEqual(b.acceptedPerStep, a.acceptedPerStep, 'same seed: same acceptances');
        assert(JSON.stringify(c.tokens) !== JSON.stringify(a.tokens), 'another seed: other tokens');
        assert(JSON.stringify(a.tokens) !== JSON.stringify(greedy), 'sampling is not greedy');
        assertEqual(a.tokens.flat().length, prompts.length * maxNewTokens, 'every prompt ran to maxNewTokens');
        assertEqual(a.acceptanceLength, 1 + a.acceptedDraftTokens / a.verifications, 'acceptance length = 1 + accepted / verifications');
        const rebuilt = prompts.map((_, p) => events.filter((e) => e.prompt === p).flatMap((e) => [...e.accepted, e.bonus]));
        assertDeepEqual(rebuilt, a.tokens, 'onVerify events (first, accepted drafts, target token) rebuild the output');
        assert(
          events.every((e) => e.first || (e.drafted !== undefined && e.accepted.every((x, i) => x === e.drafted![i]))),
          'accepted = a prefix of the drafted tokens',
        );
        ctx.note('fresh draft, T 0.9: acceptance length', Number(a.acceptanceLength.toFixed(3)));
        // At temperature 20 p and the fresh draft's q are both nearly flat (q on its 512 ids, the even
        // ones below 1024): Σ min(p, q) ≈ 1/4, so over ~40 rounds the draft's own q rows see acceptances.
        const hot = await speculativeGenerate(target, new Eagle3Proposer(drafter), prompts, {
          ...base,
          maxNewTokens: 40,
          sampling: { temperature: 20, seed: 1 },
        });
        assert(hot.acceptedDraftTokens > 0, `temperature 20: some fresh-draft tokens accepted (${hot.acceptedDraftTokens})`);
        assert(
          hot.tokens.flat().every((x) => x >= 0 && x < V_LAB),
          'tokens within the vocabulary',
        );
        ctx.note('fresh draft, T 20: accepted / verifications', `${hot.acceptedDraftTokens} / ${hot.verifications}`);

        const self = await speculativeGenerate(target, new TargetAsDraft(target, V_LAB), prompts, {
          ...base,
          sampling: { temperature: 1.1, seed: 5 },
        });
        assertEqual(self.acceptanceLength, k + 1, 'q = p: every draft accepted');
        assertEqual(self.tokens.flat().length, prompts.length * maxNewTokens, 'q = p: whole rounds');
        await assertRejects(
          () => speculativeGenerate(target, new GreedyOnly(), prompts, { ...base, sampling }),
          /needs a proposer with proposeSampled/,
          'a proposer that cannot sample',
        );
        await assertRejects(
          () => speculativeGenerate(target, new Eagle3Proposer(drafter), prompts, { ...base, sampling: { temperature: 1, seed: -1 } }),
          /seed must be an integer in \[0, 4294967295\], got -1/,
          'a negative seed',
        );
        await assertRejects(
          () => speculativeGenerate(target, new Eagle3Proposer(drafter), prompts, { ...base, sampling: { temperature: 1, topP: 0 } }),
          /topP must be in \(0, 1\], got 0/,
          'top-p 0',
        );
      } finally {
        drafter.destroy();
        target.destroy();
        gpu.destroy();
      }
    },
    { timeoutMs: 300_000 },
  );
});

const V_LAB = 2048;

async function labTargetAndDraft(ctx: TestContext): Promise<{ target: TargetModel; drafter: Eagle3Drafter; gpu: Gpu }> {
  const checkpoint = await loadHfCheckpoint(repoAssets(ctx), 'lab-target');
  const tc = checkpoint.config;
  const config = parseEagle3Config(
    {
      architectures: ['LlamaForCausalLMEagle3'],
      hidden_size: tc.hiddenSize,
      intermediate_size: 256,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      vocab_size: tc.vocabSize,
      draft_vocab_size: 512,
      rms_norm_eps: 1e-5,
      max_position_embeddings: tc.maxPositionEmbeddings,
    },
    'lab draft config',
  );
  const weights = initialEagle3Weights(config, checkpoint.weights.embedTokens, new Rng(12));
  const d2t = Int32Array.from({ length: 512 }, (_, i) => i); // target = draft + d2t = 2i
  const gpu = new Gpu(ctx.gpu);
  const target = TargetModel.create(gpu, checkpoint);
  return { target, drafter: new Eagle3Drafter(gpu, { config, weights, d2t }, target.weights.embedTokens), gpu };
}

/**
 * Drafts with the target itself (a full forward over the sequence so far per draft token): q_i is
 * the target's own p_i, so every draft must be accepted.
 */
class TargetAsDraft implements DraftProposer {
  constructor(
    private readonly target: TargetModel,
    private readonly vocab: number,
  ) {}
  begin(): void {}
  propose(): Promise<number[]> {
    throw new Error('TargetAsDraft drafts only by sampling');
  }
  async proposeSampled(tokens: readonly number[], _aux: Tensor, k: number, sampler: DraftSampler): Promise<SampledProposal> {
    const seq = [...tokens];
    const out: SampledProposal = { tokens: [], probs: [] };
    for (let i = 0; i < k; i++) {
      const f = await this.target.forward({ inputIds: seq, batch: 1, seqLen: seq.length });
      const logits = (await this.target.gpu.read(f.logits!)) as Float32Array;
      this.target.gpu.release(f.logits!, ...f.hiddenStates.values());
      const q = samplingProbabilities(logits.subarray((seq.length - 1) * this.vocab), sampler.options);
      const d = sampleFrom(q, sampler.rng);
      out.tokens.push(d);
      out.probs.push(q);
      seq.push(d);
    }
    return out;
  }
  end(): void {}
}

/** A greedy-only proposer (no proposeSampled): a sampled run must refuse it. */
class GreedyOnly implements DraftProposer {
  begin(): void {}
  propose(_t: readonly number[], _a: Tensor, k: number): Promise<number[]> {
    return Promise.resolve(new Array<number>(k).fill(0));
  }
  end(): void {}
}
