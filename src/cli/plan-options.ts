/**
 * The options of `speclab plan`: the target's config (a folder that holds only config.json, a Hugging
 * Face id whose config.json alone is read from the cache or downloaded, or the file itself), the
 * settings of `speclab train` that shape its memory (the same flag definitions, validated by the same
 * settings schema when the command runs), `speclab rollout`'s --batch (as --rollout-batch), and the
 * adapter limits to plan against. Pure: no GPU code.
 */
import { parseByteSize } from '../util/bytes.ts';
import { ROLLOUT_DEF } from './cluster-options.ts';
import { parsers, textSpec, UsageError, type CommandDef, type OptionSpec, type ParsedArgs } from './options.ts';
import { TRAIN_OPTIONS } from './train-options.ts';

/** WebGPU's default limits (what an adapter grants when a device asks for nothing more). */
export const WEBGPU_DEFAULT_LIMITS = { maxStorageBufferBindingSize: 128 * 2 ** 20, maxBufferSize: 256 * 2 ** 20 } as const;

/** The train settings a plan reads: they shape the plan's tensors, its budget and its checkpoint cadence. */
export const PLAN_TRAIN_KEYS = [
  'maxLength',
  'batchSize',
  'tttLength',
  'roundPrompts',
  'draftVocabSize',
  'auxLayers',
  'featurePrecision',
  'targetRepr',
  'recompute',
  'targetPrecision',
  'gpuMemoryBudget',
  'evalPrompts',
  'regenerate',
  'checkpointEvery',
] as const;

const trainOption = (key: string): OptionSpec => {
  const spec = TRAIN_OPTIONS.find((o) => o.key === key);
  if (!spec) throw new Error(`speclab plan: speclab train has no setting ${key}`);
  return spec;
};

const HELP: Partial<Record<(typeof PLAN_TRAIN_KEYS)[number], string>> = {
  maxLength: 'tokens of every planned sequence (a --data conversation is truncated to it: the longest a run trains on)',
  evalPrompts: 'held-out prompts the target generates replies for (the generation KV cache)',
  regenerate: 'the target also writes the training replies (as `speclab train --regenerate`, or a run on prompts)',
  gpuMemoryBudget: 'the GPU memory a role may use: a role that needs more does not fit (exit 2), as speclab train refuses it',
};

const bytes = (flag: `--${string}`, key: string, help: string, defaultBytes: number): OptionSpec => ({
  flag,
  key,
  placeholder: 'bytes',
  help,
  type: 'bytes, e.g. 128MiB, 2GiB',
  defaultText: `${defaultBytes / 2 ** 20} MiB (WebGPU's default)`,
  parse: (f, text) => parseByteSize(text, f),
});

const rolloutBatch = ROLLOUT_DEF.options.find((o) => o.key === 'batch')!;

export const PLAN_OPTIONS: readonly OptionSpec[] = [
  {
    ...trainOption('target'),
    help: 'target folder, or a Hugging Face id ORG/NAME[@REV] (a folder of that name here wins): only its config.json is read, from the Hugging Face cache or downloaded alone into it (no weights, no tokenizer)',
    defaultText: undefined,
  },
  textSpec('--target-config', 'targetConfig', 'file', "the target's config.json (instead of --target)"),
  ...PLAN_TRAIN_KEYS.map((key): OptionSpec => ({ ...trainOption(key), help: HELP[key] ?? trainOption(key).help })),
  {
    ...rolloutBatch,
    flag: '--rollout-batch',
    key: 'rolloutBatch',
    help: "prompts a rollout process leases per capture (speclab rollout's --batch)",
  },
  bytes(
    '--max-storage-binding-size',
    'maxStorageBufferBindingSize',
    "the adapter's maxStorageBufferBindingSize",
    WEBGPU_DEFAULT_LIMITS.maxStorageBufferBindingSize,
  ),
  bytes('--max-buffer-size', 'maxBufferSize', "the adapter's maxBufferSize", WEBGPU_DEFAULT_LIMITS.maxBufferSize),
  { flag: '--this-adapter', key: 'thisAdapter', help: "plan against this machine's GPU adapter limits (acquires the GPU)" },
  {
    flag: '--role',
    key: 'roles',
    placeholder: 'role',
    help: 'plan only this role: colocated (speclab train), trainer (speclab train --cluster) or rollout (speclab rollout); repeat for more',
    type: 'colocated|trainer|rollout (repeatable)',
    defaultText: 'all three',
    parse: (flag, text, previous) => [
      ...((previous as string[] | undefined) ?? []),
      parsers.choice(['colocated', 'trainer', 'rollout'])(flag, text),
    ],
  },
  {
    flag: '--disk-rate',
    key: 'diskRate',
    placeholder: 'bytes',
    help: 'a disk write rate per second, to estimate how long a checkpoint takes to write (nothing is measured)',
    type: 'bytes per second, e.g. 500MB',
    defaultText: 'no estimate',
    parse: (f, text) => parseByteSize(text, f),
  },
  { flag: '--json', key: 'json', help: 'one JSON line per role instead of the tables' },
];

export const PLAN_DEF: CommandDef = {
  name: 'plan',
  summary:
    "print a run's GPU memory plan for each role (speclab train, its --cluster trainer, speclab rollout) from the target's config.json alone, with the bytes of one sample, one checkpoint and the spill",
  epilog: [
    'The plan is of a --data run whose conversations reach --max-length tokens and fill every round (the largest a run with these flags holds).',
    'A Hugging Face id is read from the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub); when the cache has no config.json for it, that one file is downloaded into the cache (never under HF_HUB_OFFLINE=1; HF_TOKEN for gated models).',
    "No weights are read and no GPU is touched (unless --this-adapter). Limits default to WebGPU's defaults: give an adapter's with --max-storage-binding-size and --max-buffer-size, or --this-adapter.",
    'exit codes: 0 every role planned fits, 2 a role does not fit (its suggestions name the flags to change) or a usage error, 1 the config could not be read',
  ].join('\n'),
  options: PLAN_OPTIONS,
};

export interface PlanArgs {
  target?: string;
  targetConfig?: string;
  /** The train settings given, by key (validated by the run's settings schema when the command runs). */
  train: Record<string, unknown>;
  rolloutBatch: number;
  limits: { maxStorageBufferBindingSize: number; maxBufferSize: number } | 'this-adapter';
  roles: ('colocated' | 'trainer' | 'rollout')[];
  diskRate?: number;
  json: boolean;
}

export function planArgs({ values }: ParsedArgs): PlanArgs {
  const v = values as Record<string, unknown>;
  if ((v.target === undefined) === (v.targetConfig === undefined))
    throw new UsageError(
      'give the target as --target DIR (a folder with config.json, or a Hugging Face id ORG/NAME[@REV]) or --target-config FILE, one of them',
    );
  const explicit = v.maxStorageBufferBindingSize !== undefined || v.maxBufferSize !== undefined;
  if (v.thisAdapter && explicit)
    throw new UsageError('--this-adapter: takes both limits from the adapter; drop --max-storage-binding-size and --max-buffer-size');
  const train = Object.fromEntries(PLAN_TRAIN_KEYS.filter((k) => v[k] !== undefined).map((k) => [k, v[k]]));
  const roles = [...new Set((v.roles as PlanArgs['roles'] | undefined) ?? ['colocated', 'trainer', 'rollout'])];
  return {
    target: v.target as string | undefined,
    targetConfig: v.targetConfig as string | undefined,
    train,
    rolloutBatch: (v.rolloutBatch as number | undefined) ?? 4,
    limits: v.thisAdapter
      ? 'this-adapter'
      : {
          maxStorageBufferBindingSize:
            (v.maxStorageBufferBindingSize as number | undefined) ?? WEBGPU_DEFAULT_LIMITS.maxStorageBufferBindingSize,
          maxBufferSize: (v.maxBufferSize as number | undefined) ?? WEBGPU_DEFAULT_LIMITS.maxBufferSize,
        },
    roles: (['colocated', 'trainer', 'rollout'] as const).filter((r) => roles.includes(r)),
    diskRate: v.diskRate as number | undefined,
    json: v.json === true,
  };
}
