/**
 * Speculative decoding (src/inference/speculative.ts, eagle3-drafter.ts, kernels/attention-extend.ts)
 * with llama-tiny (fixtures/hf/llama-tiny) as the target and the SpecForge EAGLE3 fixture draft
 * (fixtures/eagle3: param.* + draft_config.json + d2t; its embedding is the target's):
 *   - extend attention (m queries against one sequence's cache) equals the float64 decode reference
 *     row by row;
 *   - TargetModel.extend over a cached prefix equals a full forward (logits and hidden states);
 *   - draft inference equals the training forward: catch-up rows give step_logits.0 row t, and chain
 *     steps 1..3 from row t give step_logits.k row t (both fixture variants);
 *   - speculative decoding is lossless (= `generate` greedy) for k = 1, 3, 5 with acceptance length
 *     ≥ 1 and = 1 + accepted / verifications; an oracle proposer (the target's own greedy tokens)
 *     gives exactly k + 1, an always-wrong proposer exactly 1;
 *   - `speclab eval` on the SGLang export (bf16) prints the numbers and reports lossless; with
 *     --temperature it samples and states that the output is distributed as target-only sampling.
 */
import { loadHfCheckpoint, type TargetCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import { evalCommand, parseEvalArgs } from '../../src/cli/eval.ts';
import { Eagle3Drafter, loadEagle3Draft, type Eagle3DraftCheckpoint } from '../../src/inference/eagle3-drafter.ts';
import { Eagle3Proposer, type DraftProposer } from '../../src/inference/draft-proposer.ts';
import { speculativeGenerate } from '../../src/inference/speculative.ts';
import { defaultAuxLayerIds } from '../../src/inference/target-feature-source.ts';
import { extendAttentionForward } from '../../src/kernels/attention-extend.ts';
import { EMBED_NAME } from '../../src/config/eagle3-config.ts';
import { generate } from '../../src/model/target/generate.ts';
import { TargetModel } from '../../src/model/target/model.ts';
import { decodeAttentionRef } from '../../src/reference/attention-decode.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertRelClose, assertThrows } from '../harness/assert.ts';
import { defineSuite, type TestContext } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../model/synthetic-checkpoint.ts';
import { VARIANTS } from '../model/eagle3-fixture.ts';

async function loadTarget(ctx: TestContext): Promise<TargetCheckpoint> {
  const tmp = tempStore(ctx.platform, 'spec-target');
  try {
    await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'm');
    return await loadHfCheckpoint(tmp.files, 'm');
  } finally {
    await tmp.cleanup();
  }
}

/** The fixture draft of a variant through the same loader the CLI uses (param.* keys, draft_config.json). */
async function loadFixtureDraft(ctx: TestContext, prefix: string): Promise<{ draft: Eagle3DraftCheckpoint; file: SafetensorsFile }> {
  const tmp = tempStore(ctx.platform, 'spec-draft');
  try {
    const bytes = await ctx.fixture('eagle3/eagle3_reference.safetensors');
    await tmp.files.writeAtomic('d/config.json', await ctx.fixture('eagle3/draft_config.json'));
    await tmp.files.writeAtomic('d/ref.safetensors', bytes);
    const draft = await loadEagle3Draft(tmp.files, 'd', { weightsFile: 'ref.safetensors', prefix: `${prefix}param.` });
    return { draft, file: new SafetensorsFile(bytes, 'eagle3_reference') };
  } finally {
    await tmp.cleanup();
  }
}

function randomPrompts(rng: Rng, lengths: number[], vocab: number): number[][] {
  return lengths.map((n) => Array.from({ length: n }, () => rng.int(0, vocab)));
}

/** Proposes the target's own greedy continuation (known in advance): every draft must be accepted. */
class OracleProposer implements DraftProposer {
  private prompt: readonly number[] = [];
  constructor(
    private readonly continuations: Map<string, number[]>,
    private readonly wrong = false,
    private readonly vocab = 0,
  ) {}
  begin(prompt: readonly number[]): void {
    this.prompt = prompt;
  }
  async propose(tokens: readonly number[], newAux: Tensor, k: number): Promise<number[]> {
    const ref = this.continuations.get(this.prompt.join(','));
    if (!ref) throw new Error('OracleProposer: unknown prompt');
    assert(newAux.shape[0] >= 1, 'newAux has at least one row');
    const g = tokens.length - this.prompt.length;
    const out = ref.slice(g, g + k);
    if (out.length !== k) throw new Error(`OracleProposer: asked for ${k} tokens past ${g}, the reference has ${ref.length}`);
    return this.wrong ? out.map((t) => (t + 1) % this.vocab) : out;
  }
  end(): void {}
}

/**
 * Drives an Eagle3Proposer (incremental draft cache) and checks each of its proposals against a
 * second drafter recomputing from an empty cache with every verified aux row so far; returns a mix of
 * the target's own tokens and wrong ones so that round r accepts exactly r mod (k + 1) drafts — the
 * draft cache then catches up over 1..k + 1 rows and overwrites stale chain entries.
 */
class CheckingProposer implements DraftProposer {
  private prompt: readonly number[] = [];
  private auxRows: number[] = [];
  private round = 0;
  readonly scheduled: number[] = [];
  readonly compared: number[] = [];
  private readonly inner: Eagle3Proposer;
  private readonly fresh: Eagle3Proposer;
  constructor(
    private readonly gpu: Gpu,
    incremental: Eagle3Drafter,
    scratch: Eagle3Drafter,
    private readonly continuations: Map<string, number[]>,
    private readonly vocab: number,
  ) {
    this.inner = new Eagle3Proposer(incremental);
    this.fresh = new Eagle3Proposer(scratch);
  }
  begin(prompt: readonly number[], maxLen: number): void {
    this.prompt = prompt;
    this.auxRows = [];
    this.inner.begin(prompt, maxLen);
  }
  async propose(tokens: readonly number[], newAux: Tensor, k: number): Promise<number[]> {
    this.auxRows.push(...((await this.gpu.read(newAux)) as Float32Array));
    const drafts = await this.inner.propose(tokens, newAux, k);
    const all = this.gpu.upload([tokens.length - 1, newAux.shape[1]], 'f32', this.auxRows, 'aux.all');
    try {
      this.fresh.begin(this.prompt, tokens.length + k + 1);
      assertDeepEqual(
        drafts,
        await this.fresh.propose(tokens, all, k),
        `round ${this.round}: incremental proposals equal a from-scratch recomputation`,
      );
      this.compared.push(drafts.length);
    } finally {
      this.fresh.end();
      this.gpu.release(all);
    }
    const ref = this.continuations.get(this.prompt.join(','))!;
    const g = tokens.length - this.prompt.length;
    const a = this.round++ % (k + 1);
    this.scheduled.push(Math.min(a, k));
    return Array.from({ length: k }, (_, i) => (i < a ? ref[g + i] : (ref[g + i] + 1) % this.vocab));
  }
  end(): void {
    this.inner.end();
  }
}

export default defineSuite('inference/speculative', (t) => {
  t.test('extend attention: m queries against one cache equal the float64 decode reference per row', async (ctx) => {
    const gpu = new Gpu(ctx.gpu);
    const rng = new Rng(7);
    const [heads, kvHeads, headDim, maxLen, start, m] = [4, 2, 16, 24, 9, 5];
    const q = rng.floats(m * heads * headDim);
    const k = rng.floats(maxLen * kvHeads * headDim);
    const v = rng.floats(maxLen * kvHeads * headDim);
    const tq = gpu.upload([m, heads * headDim], 'f32', q);
    const tk = gpu.upload([1, maxLen, kvHeads, headDim], 'f32', k);
    const tv = gpu.upload([1, maxLen, kvHeads, headDim], 'f32', v);
    const to = gpu.tensor([m, heads * headDim], 'f32');
    try {
      await extendAttentionForward(gpu, { q: tq, kCache: tk, vCache: tv, o: to }, { rows: m, start, heads, kvHeads, headDim, maxLen });
      const got = (await gpu.read(to)) as Float32Array;
      let worst = 0;
      for (let i = 0; i < m; i++) {
        const w = heads * headDim;
        const want = decodeAttentionRef(q.subarray(i * w, (i + 1) * w), k, v, [start + i + 1], {
          batch: 1,
          heads,
          kvHeads,
          headDim,
          maxLen,
        });
        worst = Math.max(worst, assertRelClose(got.subarray(i * w, (i + 1) * w), want, 1e-5, `row ${i}`));
      }
      ctx.note('worst rel err', worst);
      await assertRejects(
        () =>
          extendAttentionForward(gpu, { q: tq, kCache: tk, vCache: tv, o: to }, { rows: m, start: 20, heads, kvHeads, headDim, maxLen }),
        /exceed the cache capacity/,
        'overflow',
      );
    } finally {
      gpu.release(tq, tk, tv, to);
      gpu.destroy();
    }
  });

  t.test('TargetModel.extend over a cached prefix equals the full forward (logits, hidden states)', async (ctx) => {
    const checkpoint = await loadTarget(ctx);
    const gpu = new Gpu(ctx.gpu);
    const model = TargetModel.create(gpu, checkpoint);
    const { vocabSize: V, hiddenSize: H } = checkpoint.config;
    const ids = randomPrompts(new Rng(3), [13], V)[0];
    const cache = model.createKvCache(1, 20);
    try {
      const full = await model.forward({ inputIds: ids, batch: 1, seqLen: ids.length }, { hiddenStates: [2, 3] });
      const fullLogits = (await gpu.read(full.logits!)) as Float32Array;
      const fullH2 = (await gpu.read(full.hiddenStates.get(2)!)) as Float32Array;
      gpu.release(full.logits!, ...full.hiddenStates.values());
      // Prefill 8 tokens, then extend by 5 (a verification-sized pass), then roll back 2 and redo them.
      const a = await model.extend(cache, ids.slice(0, 8), { hiddenStates: [2] });
      const b = await model.extend(cache, ids.slice(8), { hiddenStates: [2] });
      assertEqual(cache.lengths[0], 13, 'cache length');
      const logitsA = (await gpu.read(a.logits)) as Float32Array;
      const logitsB = (await gpu.read(b.logits)) as Float32Array;
      const h2 = (await gpu.read(b.hiddenStates.get(2)!)) as Float32Array;
      gpu.release(a.logits, b.logits, ...a.hiddenStates.values(), ...b.hiddenStates.values());
      assertRelClose(logitsA, fullLogits.subarray(0, 8 * V), 1e-4, 'prefill logits');
      assertRelClose(logitsB, fullLogits.subarray(8 * V), 1e-4, 'extend logits');
      assertRelClose(h2, fullH2.subarray(8 * H), 1e-4, 'extend hidden_states.2');
      cache.lengths[0] = 11;
      const c = await model.extend(cache, ids.slice(11), {});
      const logitsC = (await gpu.read(c.logits)) as Float32Array;
      gpu.release(c.logits);
      ctx.note('rollback rel err', assertRelClose(logitsC, fullLogits.subarray(11 * V), 1e-4, 'logits after rollback'));
      await assertRejects(() => model.extend(cache, new Array(8).fill(1)), /exceed the cache capacity/, 'overflow');
      // A prefill that asks for the last row's logits only: [1, V], the same bits as that row of every row's.
      const lastCache = model.createKvCache(1, 20);
      try {
        const last = await model.extend(lastCache, ids.slice(0, 8), { logits: 'last' });
        assertDeepEqual(last.logits.shape, [1, V], 'one row of logits');
        const lastRow = (await gpu.read(last.logits)) as Float32Array;
        gpu.release(last.logits);
        assertDeepEqual(Array.from(lastRow), Array.from(logitsA.subarray(7 * V, 8 * V)), "the last row's logits, bit for bit");
      } finally {
        lastCache.release(gpu);
      }
    } finally {
      cache.release(gpu);
      model.destroy();
      gpu.destroy();
    }
  });

  for (const variant of VARIANTS) {
    t.test(
      `draft inference equals the training forward: step_logits.k row t (${variant.name})`,
      async (ctx) => {
        const { draft, file } = await loadFixtureDraft(ctx, variant.prefix);
        const c = draft.config;
        const [B, S] = file.shape('input_ids') as [number, number];
        const ids = file.i32('input_ids');
        const mask = file.i32('attention_mask');
        const aux = file.f32('hidden_states');
        const steps = [0, 1, 2, 3].map((k) => file.f32(`${variant.prefix}step_logits.${k}`));
        const D = c.draftVocabSize;
        const A = 3 * c.targetHiddenSize;
        const gpu = new Gpu(ctx.gpu);
        const embed = gpu.upload([c.vocabSize, c.hiddenSize], 'f32', file.f32(`${variant.prefix}param.${EMBED_NAME}`), 'embed');
        const drafter = new Eagle3Drafter(gpu, draft, embed);
        drafter.reserve(S + 4);
        let worst0 = 0;
        let worstK = 0;
        try {
          for (let b = 0; b < B; b++) {
            let len = 0;
            for (let s = 0; s < S; s++) len += mask[b * S + s];
            const tokenAt = (s: number) => (s < S ? ids[b * S + s] : 0);
            // Step 0: every valid row at once (catch-up over positions 0..len−1).
            const hAux = gpu.upload([len, A], 'f32', aux.subarray(b * S * A, (b * S + len) * A), 'aux');
            const h0 = await drafter.fc(hAux, len);
            const out = await drafter.rows(
              h0,
              Array.from({ length: len }, (_, s) => tokenAt(s)),
              0,
            );
            const got = (await gpu.read(out.logits)) as Float32Array;
            gpu.release(hAux, h0, out.hOut, out.logits);
            worst0 = Math.max(worst0, assertRelClose(got, steps[0].subarray(b * S * D, (b * S + len) * D), 1e-4, `b ${b} step 0`));
            // Steps 1..3 from a few rows t: catch up rows 0..t, then chain with teacher-forced tokens.
            for (const t0 of [0, Math.floor(len / 2), len - 1]) {
              const hA = gpu.upload([t0 + 1, A], 'f32', aux.subarray(b * S * A, (b * S + t0 + 1) * A), 'aux');
              const hF = await drafter.fc(hA, t0 + 1);
              let cur = await drafter.rows(
                hF,
                Array.from({ length: t0 + 1 }, (_, s) => tokenAt(s)),
                0,
              );
              gpu.release(hA, hF);
              for (let k = 1; k <= 3; k++) {
                const hPrev = gpu.tensor([1, c.hiddenSize], 'f32', 'hPrev');
                const rows = cur.hOut.shape[0];
                gpu.batcher.copyBuffer(
                  cur.hOut.part.buffer,
                  cur.hOut.part.byteOffset + (rows - 1) * c.hiddenSize * 4,
                  hPrev.part.buffer,
                  hPrev.part.byteOffset,
                  c.hiddenSize * 4,
                );
                gpu.release(cur.hOut, cur.logits);
                cur = await drafter.rows(hPrev, [tokenAt(t0 + k)], t0 + k);
                gpu.release(hPrev);
                const logits = (await gpu.read(cur.logits)) as Float32Array;
                const row = (b * S + t0) * D;
                worstK = Math.max(worstK, assertRelClose(logits, steps[k].subarray(row, row + D), 1e-4, `b ${b} row ${t0} step ${k}`));
              }
              gpu.release(cur.hOut, cur.logits);
            }
          }
          ctx.note('step 0 worst rel err', worst0);
          ctx.note('steps 1-3 worst rel err', worstK);
        } finally {
          drafter.destroy();
          gpu.release(embed);
          gpu.destroy();
        }
      },
      { timeoutMs: 300_000 },
    );
  }

  t.test(
    'speculative decoding is lossless for k = 1, 3, 5; oracle proposer gives k + 1, a wrong one 1',
    async (ctx) => {
      const checkpoint = await loadTarget(ctx);
      const { draft } = await loadFixtureDraft(ctx, 'strong.');
      const gpu = new Gpu(ctx.gpu);
      const target = TargetModel.create(gpu, checkpoint);
      const drafter = new Eagle3Drafter(gpu, draft, target.weights.embedTokens);
      const V = checkpoint.config.vocabSize;
      const auxLayerIds = defaultAuxLayerIds(checkpoint.config.numLayers);
      const prompts = randomPrompts(new Rng(11), [5, 9, 14], V);
      try {
        const maxNew = 25; // = 1 + 4·6 = 1 + 6·4 = 1 + 2·12: whole oracle rounds for k = 1, 3, 5
        const reference = await Promise.all(prompts.map(async (p) => (await generate(target, [p], { maxNewTokens: maxNew }))[0]));
        const continuations = new Map(prompts.map((p, i) => [p.join(','), reference[i]]));
        for (const k of [1, 3, 5]) {
          const options = { maxNewTokens: maxNew, numDraftTokens: k, auxLayerIds };
          const r = await speculativeGenerate(target, new Eagle3Proposer(drafter), prompts, options);
          assertDeepEqual(r.tokens, reference, `k = ${k}: speculative tokens equal greedy generate`);
          assert(r.acceptanceLength >= 1, `k = ${k}: acceptance length ${r.acceptanceLength} ≥ 1`);
          assertRelClose(
            [r.acceptanceLength],
            [1 + r.acceptedDraftTokens / r.verifications],
            1e-12,
            `k = ${k}: acceptance length = 1 + accepted / verifications`,
          );
          assertEqual(r.verifiedTokens, prompts.length * (maxNew - 1), `k = ${k}: every token but the prefill's comes from a verification`);
          assert(
            r.acceptedPerStep.every((a) => a >= 0 && a <= k),
            `k = ${k}: accepted per step within 0..k`,
          );
          ctx.note(`eagle3 k=${k} acceptance length`, Number(r.acceptanceLength.toFixed(4)));

          const oracle = await speculativeGenerate(target, new OracleProposer(continuations), prompts, options);
          assertDeepEqual(oracle.tokens, reference, `k = ${k}: oracle tokens equal greedy generate`);
          assertEqual(oracle.acceptanceLength, k + 1, `k = ${k}: oracle acceptance length`);
          assertEqual(oracle.verifications, prompts.length * ((maxNew - 1) / (k + 1)), `k = ${k}: oracle verifications`);

          const wrong = await speculativeGenerate(target, new OracleProposer(continuations, true, V), prompts, options);
          assertDeepEqual(wrong.tokens, reference, `k = ${k}: always-wrong proposer still lossless`);
          assertEqual(wrong.acceptanceLength, 1, `k = ${k}: always-wrong acceptance length`);
        }
        // Partial acceptance: the incremental draft cache stays equal to a from-scratch recomputation.
        const scratch = new Eagle3Drafter(gpu, draft, target.weights.embedTokens);
        try {
          const checking = new CheckingProposer(gpu, drafter, scratch, continuations, V);
          const r = await speculativeGenerate(target, checking, prompts, { maxNewTokens: maxNew, numDraftTokens: 3, auxLayerIds });
          assertDeepEqual(r.tokens, reference, 'partial acceptance: lossless');
          // Rounds that verified drafts (the last one of a prompt may verify none) follow the schedule.
          const accepted = r.acceptedPerStep.filter((_, i) => r.draftedPerStep[i] > 0);
          assertDeepEqual(accepted, checking.scheduled, 'accepted drafts per round follow the schedule');
          assert(
            checking.compared.length > 10 && checking.compared.length === accepted.length,
            `rounds compared: ${checking.compared.length}`,
          );
          ctx.note('partial-acceptance rounds checked', checking.compared.length);
        } finally {
          scratch.destroy();
        }
        // Stopping at an EOS id mid-round truncates the output there, like generate.
        const eos = reference[1][6];
        const withEos = await speculativeGenerate(target, new Eagle3Proposer(drafter), [prompts[1]], {
          maxNewTokens: maxNew,
          numDraftTokens: 3,
          auxLayerIds,
          eosTokenIds: [eos],
        });
        const ref = (await generate(target, [prompts[1]], { maxNewTokens: maxNew, eosTokenIds: [eos] }))[0];
        assertDeepEqual(withEos.tokens[0], ref, 'eos stop');
        await assertRejects(
          () => speculativeGenerate(target, new Eagle3Proposer(drafter), prompts, { maxNewTokens: 4, numDraftTokens: 0, auxLayerIds }),
          /numDraftTokens/,
          'k = 0',
        );
      } finally {
        drafter.destroy();
        target.destroy();
        gpu.destroy();
      }
    },
    { timeoutMs: 600_000 },
  );

  t.test(
    'speclab eval on the SGLang export (bf16) + llama-tiny: lossless, prints acceptance and tokens/s',
    async (ctx) => {
      const root = ctx.platform.env('SPECLAB_FIXTURES') ?? '../shared/fixtures';
      const lines: string[] = [];
      const code = await evalCommand(
        ctx.platform,
        [
          '--target',
          `${root}/hf/llama-tiny`,
          '--draft',
          `${root}/eagle3/export`,
          '--prompt',
          '1,2,3,4,5',
          '--prompt',
          '17 33 250 9 81 5 64 100',
          '--max-new-tokens',
          '12',
          '--num-draft-tokens',
          '3',
        ],
        (line) => lines.push(line),
      );
      const text = lines.join('\n');
      assertEqual(code, 0, `exit code (output:\n${text})`);
      assert(/lossless: yes/.test(text), `reports lossless:\n${text}`);
      const acc = /acceptance length ([0-9.]+)/.exec(text);
      assert(acc !== null && Number(acc[1]) >= 1, `acceptance length printed:\n${text}`);
      assert(/target only: .* tokens\/s/.test(text) && /speculative: .* tokens\/s/.test(text), `tokens/s printed:\n${text}`);
      ctx.note('export acceptance length', Number(acc![1]));
      // Sampled: no token equality to check; the numbers and the rejection-sampling statement are printed.
      const sampledLines: string[] = [];
      const sampledCode = await evalCommand(
        ctx.platform,
        [
          '--target',
          `${root}/hf/llama-tiny`,
          '--draft',
          `${root}/eagle3/export`,
          '--prompt',
          '1,2,3,4,5',
          '--max-new-tokens',
          '8',
          '--num-draft-tokens',
          '3',
          '--temperature',
          '0.8',
          '--top-k',
          '20',
          '--seed',
          '3',
        ],
        (line) => sampledLines.push(line),
      );
      const sampledText = sampledLines.join('\n');
      assertEqual(sampledCode, 0, `sampled exit code (output:\n${sampledText})`);
      assert(
        /decoding: sampled \(temperature 0\.8, top-p 1, top-k 20, seed 3/.test(sampledText),
        `sampling settings printed:\n${sampledText}`,
      );
      assert(
        /lossless: by construction \(rejection sampling/.test(sampledText) && /acceptance length [0-9.]+/.test(sampledText),
        `sampled report:\n${sampledText}`,
      );
      assert(
        /target only: .* tokens\/s/.test(sampledText) && /speculative: .* tokens\/s/.test(sampledText),
        `sampled tokens/s printed:\n${sampledText}`,
      );
      // A prompts file (one prompt per line, comments skipped) works the same.
      const tmp = tempStore(ctx.platform, 'spec-prompts');
      try {
        await tmp.files.writeAtomic('prompts.txt', new TextEncoder().encode('# token ids\n1,2,3,4,5\n\n17 33 250 9 81 5 64 100\n'));
        const fileLines: string[] = [];
        const fromFile = await evalCommand(
          ctx.platform,
          [
            '--target',
            `${root}/hf/llama-tiny`,
            '--draft',
            `${root}/eagle3/export`,
            '--prompts-file',
            `${tmp.files.root}/prompts.txt`,
            '--max-new-tokens',
            '6',
            '--num-draft-tokens',
            '2',
          ],
          (line) => fileLines.push(line),
        );
        assertEqual(fromFile, 0, `prompts-file exit code:\n${fileLines.join('\n')}`);
        assert(
          fileLines.some((l) => l.startsWith('2 prompt(s)')),
          `two prompts read from the file:\n${fileLines.join('\n')}`,
        );
      } finally {
        await tmp.cleanup();
      }
      assertThrows(() => parseEvalArgs(['--target', 'x']), /--draft is required/, 'missing --draft');
      assertThrows(() => parseEvalArgs(['--target', 'x', '--draft', 'y', '--prompt', '']), /--prompt: an empty prompt/, 'an empty prompt');
      assertThrows(
        () => parseEvalArgs(['--target', 'x', '--draft', 'y', '--prompt', '1,2,99999999999']),
        /--prompt: 99999999999 is over the limit/,
        'a token id past int32',
      );
      await assertRejects(
        () =>
          evalCommand(ctx.platform, ['--target', `${root}/hf/llama-tiny`, '--draft', `${root}/hf/llama-tiny`, '--prompt', '1'], () => {}),
        /missing draft tensor "fc.weight"|invalid EAGLE3|not LlamaForCausalLMEagle3/,
        'a target dir as draft',
      );
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );
});
