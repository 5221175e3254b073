/**
 * `speclab eval`: evaluate an EAGLE3 draft by speculative decoding against its target.
 *
 *   speclab eval --target <hf dir> --draft <sglang export dir> (--prompt <ids> … | --prompts-file <file>)
 *                [--max-new-tokens 32] [--num-draft-tokens 3] [--aux-layers 1,2,2] [--eos <ids>]
 *
 * Prompts are token ids, comma- or space-separated (`--prompt` may repeat; a prompts file has one
 * prompt per line, blank lines and `#` comments skipped). The draft directory is SpecForge's SGLang
 * export (config.json + model.safetensors with fc, midlayer.*, norm, lm_head, d2t, t2d; bf16/f16/f32);
 * the draft's embedding is the target's. Runs target-only greedy decoding and speculative decoding
 * on the same prompts, checks they produce the same tokens (exit 1 if not), and prints the acceptance
 * length (tokens per target verification, bonus included) and tokens/s with and without the draft.
 */
import { loadHfCheckpoint } from '../formats/hf-checkpoint.ts';
import { Gpu } from '../gpu/gpu.ts';
import { Eagle3Drafter, loadEagle3Draft } from '../inference/eagle3-drafter.ts';
import { Eagle3Proposer, timeSpeculative, timeTargetOnly } from '../inference/speculative.ts';
import { defaultAuxLayerIds } from '../inference/target-feature-source.ts';
import { TargetModel } from '../model/target/model.ts';
import type { Platform } from './platform.ts';
import { splitPath } from '../util/paths.ts';
import { checkPositions, decimalInt, decimalIntList, NEW_TOKENS_BOUNDS, tokenIdList, type Bounds } from './flag-values.ts';

export const EVAL_USAGE = `usage: speclab eval --target <hf dir> --draft <draft dir> (--prompt <ids> ... | --prompts-file <file>)
       [--max-new-tokens N (32)] [--num-draft-tokens K (3)] [--aux-layers a,b,c] [--eos id,...]`;

export interface EvalArgs {
  target: string;
  draft: string;
  prompts: number[][];
  promptsFile?: string;
  maxNewTokens: number;
  numDraftTokens: number;
  auxLayers?: number[];
  eos: number[];
}

/** Bounds of the numeric flags: the ones `speclab train` puts on --eval-new-tokens and --num-draft-tokens (and on aux layer ids). */
const NUM_DRAFT_TOKENS: Bounds = { min: 1, max: 64 };
const AUX_LAYER_ID: Bounds = { min: 0, max: 1023 };

/** Three aux layer ids, checked here so a wrong count fails before the target is read. */
function parseAuxLayers(flag: string, text: string): number[] {
  const ids = decimalIntList(flag, text, AUX_LAYER_ID);
  if (ids.length !== 3) throw new Error(`${flag}: EAGLE3 needs 3 aux layer ids, got ${ids.length}`);
  return ids;
}

export function parseEvalArgs(args: readonly string[]): EvalArgs {
  const out: Partial<EvalArgs> & { prompts: number[][]; eos: number[] } = { prompts: [], eos: [], maxNewTokens: 32, numDraftTokens: 3 };
  for (let i = 0; i < args.length; i++) {
    const flag = args[i];
    const value = (): string => {
      const v = args[++i];
      if (v === undefined) throw new Error(`${flag} needs a value\n${EVAL_USAGE}`);
      return v;
    };
    switch (flag) {
      case '--target': out.target = value(); break;
      case '--draft': out.draft = value(); break;
      case '--prompt': out.prompts.push(tokenIdList(flag, value())); break;
      case '--prompts-file': out.promptsFile = value(); break;
      case '--max-new-tokens': out.maxNewTokens = decimalInt(flag, value(), NEW_TOKENS_BOUNDS); break;
      case '--num-draft-tokens': out.numDraftTokens = decimalInt(flag, value(), NUM_DRAFT_TOKENS); break;
      case '--aux-layers': out.auxLayers = parseAuxLayers(flag, value()); break;
      case '--eos': out.eos = tokenIdList(flag, value()); break;
      default: throw new Error(`unknown option "${flag}"\n${EVAL_USAGE}`);
    }
  }
  if (!out.target) throw new Error(`--target is required\n${EVAL_USAGE}`);
  if (!out.draft) throw new Error(`--draft is required\n${EVAL_USAGE}`);
  if (out.prompts.some((p) => p.length === 0)) throw new Error('--prompt: an empty prompt');
  if (out.prompts.length === 0 && !out.promptsFile) throw new Error(`give prompts with --prompt or --prompts-file\n${EVAL_USAGE}`);
  return out as EvalArgs;
}

export async function evalCommand(platform: Platform, argv: readonly string[], print: (line: string) => void): Promise<number> {
  const args = parseEvalArgs(argv);
  const prompts = [...args.prompts];
  if (args.promptsFile) {
    const [dir, name] = splitPath(args.promptsFile);
    const text = new TextDecoder().decode(await platform.files(dir).read(name));
    text.split('\n').forEach((line, n) => {
      const s = line.trim();
      if (s.length > 0 && !s.startsWith('#')) prompts.push(tokenIdList(`${args.promptsFile}:${n + 1}`, s));
    });
    if (prompts.length === 0) throw new Error(`${args.promptsFile}: no prompts`);
  }
  const checkpoint = await loadHfCheckpoint(platform.files(args.target), '');
  const draft = await loadEagle3Draft(platform.files(args.draft), '');
  const tc = checkpoint.config;
  const dc = draft.config;
  if (dc.vocabSize !== tc.vocabSize) throw new Error(`draft vocab_size ${dc.vocabSize} != target vocab_size ${tc.vocabSize}`);
  if (dc.targetHiddenSize !== tc.hiddenSize) throw new Error(`draft target_hidden_size ${dc.targetHiddenSize} != target hidden_size ${tc.hiddenSize}`);
  if (dc.hiddenSize !== tc.hiddenSize) throw new Error(`draft hidden_size ${dc.hiddenSize} != target hidden_size ${tc.hiddenSize} (the draft embeds with the target's table)`);
  for (const [i, p] of prompts.entries()) {
    for (const id of p) if (id >= tc.vocabSize) throw new Error(`prompt ${i}: token id ${id} outside the target vocabulary [0, ${tc.vocabSize})`);
  }
  checkPositions(prompts, args.maxNewTokens, tc.maxPositionEmbeddings, { flag: '--max-new-tokens' });
  const auxLayerIds = args.auxLayers ?? draft.auxLayerIds ?? defaultAuxLayerIds(tc.numLayers);
  if (auxLayerIds.length !== 3) throw new Error(`EAGLE3 needs 3 aux layers, got [${auxLayerIds.join(', ')}]`);

  const ctx = await platform.acquireGpu();
  const gpu = new Gpu(ctx);
  const target = TargetModel.create(gpu, checkpoint);
  const drafter = new Eagle3Drafter(gpu, draft, target.weights.embedTokens);
  try {
    const now = () => performance.now();
    print(`target ${args.target}: ${tc.numLayers} layers, hidden ${tc.hiddenSize}, vocab ${tc.vocabSize}; draft ${args.draft}: draft vocab ${dc.draftVocabSize}; aux layers [${auxLayerIds.join(', ')}]`);
    print(`${prompts.length} prompt(s), max ${args.maxNewTokens} new tokens, ${args.numDraftTokens} draft tokens per verification`);
    // Warm-up (pipeline compilation) on the first prompt, not timed.
    await timeTargetOnly(target, [prompts[0]], 2, now, args.eos);
    await timeSpeculative(target, new Eagle3Proposer(drafter), [prompts[0]], { maxNewTokens: 2 + args.numDraftTokens, numDraftTokens: args.numDraftTokens, auxLayerIds, eosTokenIds: args.eos }, now);
    const base = await timeTargetOnly(target, prompts, args.maxNewTokens, now, args.eos);
    const spec = await timeSpeculative(target, new Eagle3Proposer(drafter), prompts, { maxNewTokens: args.maxNewTokens, numDraftTokens: args.numDraftTokens, auxLayerIds, eosTokenIds: args.eos }, now);
    const r = spec.result;
    const same = base.tokens.every((t, i) => t.length === r.tokens[i].length && t.every((x, j) => x === r.tokens[i][j]));
    print(`target only:  ${base.speed.tokens} tokens in ${base.speed.seconds.toFixed(3)} s = ${base.speed.tokensPerSecond.toFixed(2)} tokens/s`);
    print(`speculative:  ${spec.speed.tokens} tokens in ${spec.speed.seconds.toFixed(3)} s = ${spec.speed.tokensPerSecond.toFixed(2)} tokens/s (speedup ${(spec.speed.tokensPerSecond / base.speed.tokensPerSecond).toFixed(2)}x)`);
    print(`verifications ${r.verifications}, accepted draft tokens ${r.acceptedDraftTokens}, acceptance length ${r.acceptanceLength.toFixed(3)} (tokens per verification, bonus included)`);
    print(`lossless: ${same ? 'yes (speculative tokens equal target greedy tokens)' : 'NO — speculative output differs from target greedy decoding'}`);
    return same ? 0 : 1;
  } finally {
    drafter.destroy();
    target.destroy();
    gpu.destroy();
    ctx.destroy();
  }
}
