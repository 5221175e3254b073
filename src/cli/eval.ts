/**
 * `speclab eval`: evaluate an EAGLE3 draft by speculative decoding against its target.
 *
 *   speclab eval --target <hf dir> --draft <sglang export dir> (--prompt <text|ids> … | --prompts-file <file>)
 *                [--max-new-tokens 32] [--num-draft-tokens 3] [--aux-layers 1,2,2] [--eos <ids>]
 *                [--temperature 0] [--top-p 1] [--top-k 0] [--seed 0]
 *
 * A prompt made only of digits, commas and blanks is token ids; anything else is text, encoded with
 * the target's tokenizer after its BOS token (`--prompt` may repeat; a prompts file has one prompt
 * per line, blank lines and `#` comments skipped). Options: command-options.ts (`speclab eval --help`).
 * The draft directory is SpecForge's SGLang export (config.json + model.safetensors with fc,
 * midlayer.*, norm, lm_head, d2t, t2d; bf16/f16/f32);
 * the draft's embedding is the target's. Runs target-only greedy decoding and speculative decoding
 * on the same prompts, checks they produce the same tokens (exit 1 if not), and prints the acceptance
 * length (tokens per target verification, bonus included) and tokens/s with and without the draft.
 * With --temperature > 0 both runs sample (the draft with the same settings, the target verifying by
 * rejection sampling, docs/eagle3.md §9): the speculative output is distributed as target-only
 * sampling but not token-equal to it, so only the numbers are reported.
 */
import { HfCheckpointSource } from '../formats/hf-checkpoint-source.ts';
import { ChatTokenizer } from '../formats/tokenizer.ts';
import { Gpu } from '../gpu/gpu.ts';
import { Eagle3Drafter, loadEagle3Draft } from '../inference/eagle3-drafter.ts';
import { Eagle3Proposer } from '../inference/draft-proposer.ts';
import { timeSpeculative, timeTargetOnly } from '../inference/speculative.ts';
import { isSampling } from '../inference/speculative-sampling.ts';
import { defaultAuxLayerIds } from '../inference/target-feature-source.ts';
import { progressFor } from '../training/run/platform.ts';
import { loadTarget } from '../training/run/target-load.ts';
import type { FileStore } from '../ports/storage.ts';
import type { Platform } from './platform.ts';
import { splitPath } from '../util/paths.ts';
import { checkPositions } from './flag-values.ts';
import { EVAL_DEF, evalArgs, parsePromptArg, type EvalArgs, type PromptArg } from './command-options.ts';
import { settingsOrExit } from './options.ts';
import { resolveTargetDir } from '../training/run/run-plan.ts';
import { READ_BUDGETS } from '../ports/read-budget.ts';

export { parseEvalArgs, parsePromptArg, type EvalArgs, type PromptArg } from './command-options.ts';

/** `speclab eval` from argv (help included). */
export async function evalCommand(platform: Platform, argv: readonly string[], print: (line: string) => void): Promise<number> {
  const p = settingsOrExit(EVAL_DEF, argv, evalArgs, print);
  return 'exit' in p ? p.exit : runEval(platform, p.settings, print);
}

/** Token ids of the prompts: text ones encoded with the target's tokenizer after its BOS token (as `speclab generate` does). */
export async function encodePrompts(store: FileStore, prompts: readonly PromptArg[]): Promise<number[][]> {
  if (prompts.every((p) => typeof p !== 'string')) return prompts as number[][];
  const tokenizer = await ChatTokenizer.load(store, '');
  const config = JSON.parse(new TextDecoder().decode(await store.read('config.json', READ_BUDGETS.config))) as {
    bos_token_id?: number | null;
  };
  const bos = typeof config.bos_token_id === 'number' ? [config.bos_token_id] : [];
  return prompts.map((p) => (typeof p === 'string' ? [...bos, ...tokenizer.encode(p)] : p));
}

export async function runEval(platform: Platform, args: EvalArgs, print: (line: string) => void): Promise<number> {
  const given = [...args.prompts];
  if (args.promptsFile) {
    const [dir, name] = splitPath(args.promptsFile);
    const text = new TextDecoder().decode(await platform.files(dir).read(name, READ_BUDGETS.promptsFile));
    text.split('\n').forEach((line, n) => {
      const s = line.trim();
      if (s.length > 0 && !s.startsWith('#')) given.push(parsePromptArg(`${args.promptsFile}:${n + 1}`, s));
    });
    if (given.length === 0) throw new Error(`${args.promptsFile}: no prompts`);
  }
  const targetDir = await resolveTargetDir(platform, args.target, print);
  const prompts = await encodePrompts(platform.files(targetDir), given);
  prompts.forEach((p, i) => {
    if (p.length === 0) throw new Error(`prompt ${i}: no tokens`);
  });
  const source = await HfCheckpointSource.open(platform.files(targetDir), '');
  const draft = await loadEagle3Draft(platform.files(args.draft), '');
  const tc = source.config;
  const dc = draft.config;
  if (dc.vocabSize !== tc.vocabSize) throw new Error(`draft vocab_size ${dc.vocabSize} != target vocab_size ${tc.vocabSize}`);
  if (dc.targetHiddenSize !== tc.hiddenSize)
    throw new Error(`draft target_hidden_size ${dc.targetHiddenSize} != target hidden_size ${tc.hiddenSize}`);
  if (dc.hiddenSize !== tc.hiddenSize)
    throw new Error(`draft hidden_size ${dc.hiddenSize} != target hidden_size ${tc.hiddenSize} (the draft embeds with the target's table)`);
  for (const [i, p] of prompts.entries()) {
    for (const id of p)
      if (id >= tc.vocabSize) throw new Error(`prompt ${i}: token id ${id} outside the target vocabulary [0, ${tc.vocabSize})`);
  }
  checkPositions(prompts, args.maxNewTokens, tc.maxPositionEmbeddings, { flag: '--max-new-tokens' });
  const auxLayerIds = args.auxLayers ?? draft.auxLayerIds ?? defaultAuxLayerIds(tc.numLayers);
  if (auxLayerIds.length !== 3) throw new Error(`EAGLE3 needs 3 aux layers, got [${auxLayerIds.join(', ')}]`);

  const ctx = await platform.acquireGpu();
  const gpu = new Gpu(ctx);
  const target = await loadTarget(gpu, source, args.targetPrecision, progressFor(platform, print));
  const drafter = new Eagle3Drafter(gpu, draft, target.weights.embedTokens);
  try {
    const now = () => performance.now();
    print(
      `target ${args.target}: ${tc.numLayers} layers, hidden ${tc.hiddenSize}, vocab ${tc.vocabSize}; draft ${args.draft}: draft vocab ${dc.draftVocabSize}; aux layers [${auxLayerIds.join(', ')}]`,
    );
    print(`${prompts.length} prompt(s), max ${args.maxNewTokens} new tokens, ${args.numDraftTokens} draft tokens per verification`);
    const sampling = { temperature: args.temperature, topP: args.topP, topK: args.topK, seed: args.seed };
    const sampled = isSampling(sampling);
    const mode = sampled
      ? `sampled (temperature ${args.temperature}, top-p ${args.topP}, top-k ${args.topK}, seed ${args.seed}; the draft with the same settings)`
      : 'greedy';
    print(`decoding: ${mode}`);
    const specOptions = { numDraftTokens: args.numDraftTokens, auxLayerIds, eosTokenIds: args.eos, sampling };
    // Warm-up (pipeline compilation) on the first prompt, not timed.
    await timeTargetOnly(target, [prompts[0]], 2, now, args.eos, sampling);
    await timeSpeculative(
      target,
      new Eagle3Proposer(drafter),
      [prompts[0]],
      { ...specOptions, maxNewTokens: 2 + args.numDraftTokens },
      now,
    );
    const base = await timeTargetOnly(target, prompts, args.maxNewTokens, now, args.eos, sampling);
    const spec = await timeSpeculative(
      target,
      new Eagle3Proposer(drafter),
      prompts,
      { ...specOptions, maxNewTokens: args.maxNewTokens },
      now,
    );
    const r = spec.result;
    print(
      `target only:  ${base.speed.tokens} tokens in ${base.speed.seconds.toFixed(3)} s = ${base.speed.tokensPerSecond.toFixed(2)} tokens/s`,
    );
    print(
      `speculative:  ${spec.speed.tokens} tokens in ${spec.speed.seconds.toFixed(3)} s = ${spec.speed.tokensPerSecond.toFixed(2)} tokens/s (speedup ${(spec.speed.tokensPerSecond / base.speed.tokensPerSecond).toFixed(2)}x)`,
    );
    print(
      `verifications ${r.verifications}, accepted draft tokens ${r.acceptedDraftTokens}, acceptance length ${r.acceptanceLength.toFixed(3)} (tokens per verification, bonus included)`,
    );
    if (sampled) {
      // Two samplers with different random streams: token equality is not expected, only equal distributions.
      print(
        'lossless: by construction (rejection sampling: the speculative output is distributed as target-only sampling at these settings; tokens are not compared)',
      );
      return 0;
    }
    const same = base.tokens.every((t, i) => t.length === r.tokens[i].length && t.every((x, j) => x === r.tokens[i][j]));
    print(
      `lossless: ${same ? 'yes (speculative tokens equal target greedy tokens)' : 'NO — speculative output differs from target greedy decoding'}`,
    );
    return same ? 0 : 1;
  } finally {
    drafter.destroy();
    target.destroy();
    gpu.destroy();
    ctx.destroy();
  }
}
