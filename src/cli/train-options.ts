/**
 * The options of `speclab train` and `speclab prepare`, and the keys of a `train --config` file.
 *
 * Every setting has one name: the flag `--kebab-case`, the config key `camelCase` (or its
 * `snake_case`, or SpecForge's name where SpecForge has the setting: `num_epochs`, `learning_rate`,
 * `log_interval`, …). Flags read decimal text (flag-values.ts); the ranges are the settings schema's
 * (trainConfigSchema in train.ts, over the session's sessionSettingsSchema), checked once flags and
 * config file are merged, so a value is refused the same way from either. The ranges and defaults
 * shown in help are listed here (the schema imports the GPU code, help must not); test/cli/cli.test.ts
 * checks that they equal the schema's.
 */
import type { Bounds } from './flag-values.ts';
import { speclabCommand } from '../util/cli-command.ts';
import { parseByteSize } from '../util/bytes.ts';
import {
  describeBounds,
  parsers,
  parseCommand,
  textSpec,
  UsageError,
  type CommandDef,
  type OptionSpec,
  type ParsedArgs,
} from './options.ts';
import { checkClusterSettings, TARGET_PRECISION, TRAIN_CLUSTER_OPTIONS } from './cluster-options.ts';

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A numeric setting: decimal text from the flag, range checked by the schema (shown in help). */
function numeric(key: string, kind: 'integer' | 'number', bounds: Bounds, defaultText: string | undefined, help: string): OptionSpec {
  return {
    flag: `--${kebab(key)}`,
    key,
    placeholder: kind === 'integer' ? 'n' : 'x',
    help,
    type: describeBounds(kind, bounds),
    defaultText,
    parse: parsers.decimal,
  };
}
const int = (key: string, min: number, max: number, defaultValue: number | string | undefined, help: string) =>
  numeric(key, 'integer', { min, max }, defaultValue === undefined ? undefined : String(defaultValue), help);
const path = (key: string, placeholder: string, help: string, defaultValue?: string) =>
  textSpec(`--${kebab(key)}`, key, placeholder, help, defaultValue);
const AUX_LAYERS: OptionSpec = {
  flag: '--aux-layers',
  key: 'auxLayers',
  placeholder: 'a,b,c',
  help: 'three target layer ids whose outputs feed the draft, e.g. 1,2,3',
  type: 'three integers in [0, 1023]',
  defaultText: '[1, N/2 − 1, N − 4] of an N-layer target',
  parse: parsers.decimalList,
};
const TARGET = path(
  'target',
  'dir|ORG/NAME[@REV]',
  'Hugging Face target: a model directory, or an id read from (or downloaded into) the Hugging Face cache',
  'the lab target, when assets/lab-target has a model',
);
const PROMPTS_FILE = path(
  'promptsFile',
  'file',
  'JSON array of token-id arrays: prompts to continue with the target (the last --eval-prompts held out)',
  'the lab corpus for the lab target, else seeded random prompts',
);
const SEED = int('seed', 0, 2 ** 32 - 1, 0, 'seed of the prompts, the draft init and the data order');
const TRAIN_PROMPTS = int(
  'trainPrompts',
  1,
  10_000_000,
  32,
  'training prompts (generated or taken from the corpus); with --data: at most this many conversations (not given: every usable one)',
);
const EVAL_PROMPTS = int(
  'evalPrompts',
  0,
  100_000,
  4,
  'held-out prompts for the acceptance measurement; 0: none (no acceptance measured, no --eval-every; a --cluster trainer on a dataset then loads only the target embedding and lm_head rows)',
);
const PROMPT_LENGTH = int('promptLength', 1, 1_048_576, 8, 'tokens per generated/corpus prompt');
const RESPONSE_LENGTH = int('responseLength', 1, 1_048_576, 48, 'tokens the target generates after each prompt (the loss-masked part)');
// Stored features (feature store, spill, offline shards) in f16 halve their bytes; the draft still trains in f32.
const FEATURE_PRECISION: OptionSpec = {
  flag: '--feature-precision',
  key: 'featurePrecision',
  placeholder: 'f32|f16',
  help: 'precision of the stored target features (the draft trains in f32 either way); f16 refuses a sample with a value beyond ±65504',
  defaultText: 'f32',
  parse: parsers.choice(['f32', 'f16']),
};

// What a rollout sends as the target: compact features by default, the full logits on request.
const TARGET_REPR: OptionSpec = {
  flag: '--target-repr',
  key: 'targetRepr',
  placeholder: 'hidden_state|logits',
  help: "what a rollout sends as the target: hidden_state (compact: the target's final hidden state with each position's full-vocabulary logsumexp and argmax; the trainer projects it on the draft vocabulary's lm_head rows, no [S, V] tensor anywhere) or logits (the full-vocabulary logits, for parity tests and small targets)",
  defaultText: 'hidden_state',
  parse: parsers.choice(['hidden_state', 'logits']),
};

// Activation recompute: the plan decides by default.
const RECOMPUTE: OptionSpec = {
  flag: '--recompute',
  key: 'recompute',
  placeholder: 'auto|on|off',
  help: "recompute each TTT step's activations in the draft's backward instead of keeping them (the same bits; about one more forward of the step's body per step): auto turns it on when the memory plan fits only with it",
  defaultText: 'auto',
  parse: parsers.choice(['auto', 'on', 'off']),
};

// --target-precision: defined with the cluster options (speclab rollout reads it too).
export { checkClusterSettings, TARGET_PRECISION };

/** The chat-dataset settings of train and prepare. */
const DATA_OPTIONS: readonly OptionSpec[] = [
  {
    flag: '--data',
    key: 'data',
    placeholder: 'file',
    help: 'chat dataset: JSONL, JSON or Parquet rows with "conversations" or "messages" (role/content or ShareGPT from/value), optional "system"; repeat for more files',
    type: 'file (repeatable)',
    parse: (_flag, text, previous) => [...((previous as string[] | undefined) ?? []), text],
  },
  path('evalData', 'file', 'held-out conversations for the acceptance measurement', 'the last --eval-prompts rows of --data'),
  textSpec(
    '--chat-template',
    'chatTemplate',
    'name|file',
    'chat template: llama3, qwen, speclab, or a Jinja file',
    "the target's tokenizer_config.json chat_template",
  ),
  int('maxLength', 1, 1_048_576, 2048, 'tokens per conversation; longer ones are truncated (SpecForge max_length)'),
  {
    flag: '--regenerate',
    key: 'regenerate',
    help: "the target rewrites every reply of each conversation, turn by turn (up to --response-length tokens each), instead of training on the dataset's",
  },
  numeric('temperature', 'number', { min: 0, max: 100 }, '0', 'sampling temperature of --regenerate (0: greedy)'),
];

/** Every setting of `speclab train`, in help order; keys are TrainConfig's. */
export const TRAIN_OPTIONS: readonly OptionSpec[] = [
  {
    flag: '--config',
    key: 'config',
    placeholder: 'file',
    help: 'JSON file of settings (keys below in camelCase or snake_case, or SpecForge names); flags override it',
    parse: parsers.text,
  },
  TARGET,
  ...DATA_OPTIONS,
  PROMPTS_FILE,
  path('offline', 'dir', 'train from a feature set written by speclab prepare (its data settings and aux layers apply; no rollout)'),
  path(
    'out',
    'dir',
    'output directory: metrics.jsonl, summary.json, draft/ (SGLang export), checkpoints/, metadata/, spill/',
    'runs/train',
  ),
  { flag: '--resume', key: 'resume', help: 'continue the run in --out from its last checkpoint' },
  { flag: '--fresh', key: 'fresh', help: 'delete the run state in --out (checkpoints, ledger, spill) and start over' },
  ...TRAIN_CLUSTER_OPTIONS,
  TRAIN_PROMPTS,
  EVAL_PROMPTS,
  PROMPT_LENGTH,
  RESPONSE_LENGTH,
  int('epochs', 1, 10_000, 6, 'passes over the training sequences (each one rolled out again through the runtime)'),
  int('roundPrompts', 1, 1_000_000, 16, 'sequences rolled out per round before the trainer consumes them'),
  int('batchSize', 1, 65_536, 4, 'sequences per optimizer step'),
  int('tttLength', 1, 64, 4, 'EAGLE3 training-time-test unroll length'),
  numeric('lr', 'number', { min: 0, exclusiveMin: true, max: 1 }, '0.003', 'peak AdamW learning rate (cosine schedule with warmup)'),
  numeric('warmupRatio', 'number', { min: 0, max: 1, exclusiveMax: true }, '0.05', 'fraction of steps spent warming up'),
  numeric('maxGradNorm', 'number', { min: 0, exclusiveMin: true, max: 1e6 }, '0.5', 'gradient clipping norm'),
  int('draftVocabSize', 1, 4_194_304, 'the target vocabulary, at most 32000', 'draft vocabulary size'),
  AUX_LAYERS,
  int('numDraftTokens', 1, 64, 3, 'draft tokens per verification when evaluating'),
  {
    ...int('maxNewTokens', 1, 1_048_576, 32, 'tokens generated per prompt when evaluating (before and after training)'),
    deprecated: ['--eval-new-tokens'],
  },
  int('evalTrainPrompts', 0, 100_000, 4, 'training prompts also evaluated (0 = none)'),
  int(
    'evalEvery',
    0,
    1_000_000,
    50,
    'score the draft on the held-out data every N optimizer steps and at the last (forward only; 0 = never)',
  ),
  int(
    'rolloutWorkers',
    1,
    8,
    1,
    'rollout workers capturing target features (they share the GPU); not with --cluster, whose rollout runs in speclab rollout processes',
  ),
  int('checkpointEvery', 1, 1_000_000, 8, 'checkpoint (and durably ack) every N steps, and at the end of every round'),
  SEED,
  FEATURE_PRECISION,
  TARGET_REPR,
  RECOMPUTE,
  TARGET_PRECISION,
  int('logEvery', 1, 1_000_000, 10, 'print a progress line every N steps'),
  int(
    'maxNonfiniteSteps',
    0,
    1_000_000,
    3,
    'optimizer steps with a NaN/Inf loss or gradient norm (each skipped on the GPU) tolerated before the run stops',
  ),
  {
    flag: '--gpu-memory-budget',
    key: 'gpuMemoryBudget',
    placeholder: 'bytes',
    help: 'refuse (exit 2) a run whose GPU memory plan, printed before anything is allocated, needs more (WebGPU reports no total memory)',
    type: 'bytes, e.g. 8GB, 7.5GiB, 512MiB',
    defaultText: "none: only the adapter's buffer limits are checked",
    parse: (flag, text) => parseByteSize(text, flag),
  },
];

/** SpecForge's names (scripts/train_eagle3.py flags, config/schema.py TrainingConfig) for SpecLab's settings. */
export const SPECFORGE_KEYS: Readonly<Record<string, string>> = {
  target_model_path: 'target',
  train_data_path: 'data',
  eval_data_path: 'evalData',
  output_dir: 'out',
  num_epochs: 'epochs',
  batch_size: 'batchSize',
  learning_rate: 'lr',
  ttt_length: 'tttLength',
  warmup_ratio: 'warmupRatio',
  max_grad_norm: 'maxGradNorm',
  draft_vocab_size: 'draftVocabSize',
  num_rollout_workers: 'rolloutWorkers',
  aux_hidden_state_layer_ids: 'auxLayers',
  save_interval: 'checkpointEvery',
  log_interval: 'logEvery',
  eval_interval: 'evalEvery',
  seed: 'seed',
};

/** Config keys of earlier versions, still read (with a notice). */
const DEPRECATED_KEYS: Readonly<Record<string, string>> = { evalNewTokens: 'maxNewTokens', eval_new_tokens: 'maxNewTokens' };

const SETTING_KEYS = TRAIN_OPTIONS.map((o) => o.key).filter((k) => k !== 'config');
const CONFIG_KEYS = new Map<string, string>([
  ...SETTING_KEYS.map((k) => [k, k] as const),
  ...SETTING_KEYS.map((k) => [snake(k), k] as const),
  ...Object.entries(SPECFORGE_KEYS),
]);

/**
 * A config file's settings under SpecLab's camelCase keys. Accepts camelCase, snake_case and
 * SpecForge's names; refuses an unknown key or two names for one setting, naming the file and key.
 */
export function normalizeConfigKeys(json: Record<string, unknown>, file: string, notices: string[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const from: Record<string, string> = {};
  for (const [name, value] of Object.entries(json)) {
    let key = CONFIG_KEYS.get(name);
    if (!key && DEPRECATED_KEYS[name]) {
      key = DEPRECATED_KEYS[name];
      notices.push(`${file}: key "${name}" is deprecated; use "${key}"`);
    }
    if (!key)
      throw new UsageError(
        `${file}: unknown key "${name}" (keys are the settings of ${speclabCommand('train --help')}, in camelCase or snake_case)`,
      );
    if (key in out) throw new UsageError(`${file}: "${from[key]}" and "${name}" are the same setting; keep one`);
    out[key] = value;
    from[key] = name;
  }
  return out;
}

const TRAIN_EPILOG = [
  'Numbers are decimal (0x10, 1_000 or Infinity are refused); a value outside its range is refused before anything runs.',
  'A killed or interrupted run continues with --resume (same settings); an existing run in --out is never overwritten without --fresh.',
  `With --cluster URL --run NAME this process is the trainer of a cluster run: rollout runs in \`${speclabCommand('rollout --cluster URL --run NAME --target DIR')}\` processes (Node), the ledger is in Redis; --out keeps checkpoints, metrics and sequences.`,
  'Ctrl-C (SIGINT/SIGTERM) while training finishes the current step, writes a checkpoint and exits 130; a second one exits at once.',
  `SpecForge config names: ${Object.entries(SPECFORGE_KEYS)
    .map(([k, v]) => `${k} → ${v}`)
    .join(', ')}.`,
  'exit codes: 0 success (speculative decoding lossless), 1 the run failed, 2 usage error, 130 interrupted',
].join('\n');

export const TRAIN_DEF: CommandDef = {
  name: 'train',
  summary:
    'train an EAGLE3 draft online for a target (rollout → feature store → trainer), or --offline from prepared shards; export it, and compare acceptance before/after',
  epilog: TRAIN_EPILOG,
  options: TRAIN_OPTIONS,
};

/** The data settings of train, plus where to write (same names, defaults and ranges). */
export const PREPARE_DEF: CommandDef = {
  name: 'prepare',
  summary: 'run the target over a chat dataset or prompts and write its EAGLE3 features as offline shards (for train --offline DIR)',
  epilog: `Train on the shards with: ${speclabCommand('train --offline DIR')}\nexit codes: 0 success, 1 the run failed, 2 usage error`,
  options: [
    TARGET,
    ...DATA_OPTIONS,
    PROMPTS_FILE,
    path(
      'out',
      'dir',
      'output directory (must not hold a prepared set yet): manifest.json and shards/<index>.safetensors',
      'runs/prepared',
    ),
    {
      ...TRAIN_PROMPTS,
      help: 'training prompts (generated or taken from the corpus): one shard each; with --data: at most this many conversations (not given: every usable one)',
    },
    { ...int('evalPrompts', 1, 100_000, 4, ''), help: 'held-out prompts, recorded in the manifest for the acceptance measurement' },
    PROMPT_LENGTH,
    RESPONSE_LENGTH,
    AUX_LAYERS,
    { ...SEED, help: 'seed of the random prompts' },
    FEATURE_PRECISION,
  ],
};

export interface TrainFlags {
  /** `--config` FILE. */
  configFile?: string;
  /** Flag settings by config key (numbers parsed; ranges checked when merged with the file). */
  values: Record<string, unknown>;
  notices: string[];
  /** The words given (for the resume hint). */
  args: readonly string[];
}

/** Raw values from argv: `--config` path and flag settings (numbers parsed, validation later). */
export function parseTrainFlags(args: readonly string[]): TrainFlags {
  return trainArgs(parseCommand(TRAIN_DEF, args));
}

export function trainArgs({ values, notices, args }: ParsedArgs): TrainFlags {
  const { config, ...settings } = values;
  checkClusterSettings(settings);
  return { configFile: config as string | undefined, values: settings, notices, args };
}
