/**
 * The options of the commands that reach a run's shared control plane (`speclab status`,
 * `speclab rollout`, and the `--cluster`/`--run` of `speclab train`), and the checks of a cluster
 * address and of the flags that go with it. Pure: no GPU code, no sockets.
 *
 * `--target-precision` is defined here (train-options.ts re-exports it) because `speclab rollout`
 * must read it exactly as train does, and train-options.ts imports this file: the spec living
 * here keeps the two modules free of an import cycle.
 */
import { validateRunId } from '../control/redis/redis-keys.ts';
import { nameProblem } from '../dataplane/names.ts';
import { intSpec, parsers, textSpec, UsageError, type CommandDef, type OptionSpec, type ParsedArgs } from './options.ts';
import { PROMPT_LEASE_MS } from '../training/run/prompt-lease.ts';

export interface StatusArgs {
  cluster: string;
  run: string;
  format: 'text' | 'json';
}

export const STATUS_DEF: CommandDef = {
  name: 'status',
  summary:
    "print a run's control-plane status from its Redis: prompts and samples by state, workers, trainers, backlog, the durable ack step",
  epilog: 'Read-only: it changes nothing in Redis. exit codes: 0 printed, 1 Redis unreachable or its records damaged, 2 usage error',
  options: [
    textSpec('--cluster', 'cluster', 'url', 'the Redis of the run, redis://host:port/db (e.g. redis://127.0.0.1:6399/0)', undefined, true),
    textSpec('--run', 'run', 'name', 'the run id (the --run of its trainer and rollout workers)', undefined, true),
    {
      ...textSpec('--format', 'format', 'text|json', 'text lines, or one JSON object', 'text'),
      parse: (flag, text) => choice(flag, text, ['text', 'json']),
    },
  ],
};

function choice(flag: string, text: string, choices: readonly string[]): string {
  if (!choices.includes(text)) throw new UsageError(`${flag}: must be ${choices.join(' or ')}, got ${JSON.stringify(text)}`);
  return text;
}

/** A redis:// URL with a host (rediss:// too); anything else is a usage error naming the flag. */
export function clusterUrl(flag: string, text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`${flag}: ${JSON.stringify(text)} is not a URL; give redis://host:port/db`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:')
    throw new UsageError(`${flag}: ${JSON.stringify(text)} is not a redis:// URL`);
  if (url.hostname.length === 0) throw new UsageError(`${flag}: ${JSON.stringify(text)} names no host`);
  return text;
}

/** A run id usable as the Redis hash tag of its keys (src/control/redis/redis-keys.ts). */
export function runName(flag: string, text: string): string {
  try {
    validateRunId(text, flag);
  } catch (err) {
    throw new UsageError((err as Error).message.replace(`${flag}: runId`, flag));
  }
  // The run id is also the name of the run's data-plane partition, so it must be a valid one.
  const problem = nameProblem(text);
  if (problem !== null) throw new UsageError(`${flag} ${JSON.stringify(text)} ${problem}: it also names the run's data-plane partition`);
  return text;
}

// The frozen target's matrices stored as f16 on the GPU halve its bytes; arithmetic stays f32.
export const TARGET_PRECISION: OptionSpec = {
  flag: '--target-precision',
  key: 'targetPrecision',
  placeholder: 'f32|f16',
  help: "storage of the target's weight matrices on the GPU (f16 halves them; arithmetic stays f32); f16 refuses a weight beyond ±65504",
  defaultText: 'f32',
  parse: parsers.choice(['f32', 'f16']),
};

export { PROMPT_LEASE_MS };

/** `--cluster` and `--run` of `speclab train`: both or neither (checkClusterSettings). */
export const TRAIN_CLUSTER_OPTIONS: readonly OptionSpec[] = [
  {
    ...textSpec(
      '--cluster',
      'cluster',
      'url',
      'trainer of a cluster run: the Redis of its control plane and feature store, redis://host:port/db; rollout runs in `speclab rollout` processes (needs --run)',
    ),
    parse: clusterUrl,
  },
  {
    ...textSpec('--run', 'run', 'name', 'the run id of the cluster run (the --run of its rollout processes); needs --cluster'),
    parse: runName,
  },
  intSpec(
    '--prompt-lease-ms',
    'promptLeaseMs',
    { min: 100, max: 86_400_000 },
    'a rollout worker that holds prompts this long without committing them has died: they go back to the ledger for another worker (cluster runs)',
    PROMPT_LEASE_MS,
  ),
];

/**
 * The cluster settings of a train run, from flags or a config file: `cluster` and `run` both or
 * neither, and nothing that only a single-process run has (its own rollout workers, offline
 * shards). Usage errors name the flag.
 */
export function checkClusterSettings<T extends Readonly<Record<string, unknown>>>(settings: T, source = 'train flags'): T {
  const given = (key: string) => settings[key] !== undefined;
  if (given('cluster') && !given('run')) throw new UsageError(`--cluster: needs --run NAME (the run id its rollout processes join)`);
  if (given('run') && !given('cluster')) throw new UsageError(`--run: needs --cluster redis://host:port/db (a run id names a cluster run)`);
  if (given('promptLeaseMs') && !given('cluster'))
    throw new UsageError('--prompt-lease-ms: only a --cluster run leases prompts to other processes');
  if (!given('cluster')) return settings;
  if (typeof settings.cluster !== 'string')
    throw new UsageError(`--cluster: ${source} gives ${JSON.stringify(settings.cluster)}, not a redis:// URL`);
  if (typeof settings.run !== 'string') throw new UsageError(`--run: ${source} gives ${JSON.stringify(settings.run)}, not a run name`);
  clusterUrl('--cluster', settings.cluster);
  runName('--run', settings.run);
  if (given('rolloutWorkers'))
    throw new UsageError(
      '--rollout-workers: has no meaning with --cluster (rollout runs in `speclab rollout` processes; start as many as you want); drop it',
    );
  if (given('offline')) throw new UsageError('--offline: trains from prepared shards, without rollout; it cannot be a --cluster run');
  return settings;
}

export interface RolloutArgs {
  cluster: string;
  run: string;
  target: string;
  targetPrecision: 'f32' | 'f16';
  batch: number;
  pollMs: number;
  workerId?: string;
  waitMs: number;
}

export const ROLLOUT_DEF: CommandDef = {
  name: 'rollout',
  summary:
    "rollout worker of a cluster run: capture target features for the prompts its trainer (speclab train --cluster) ingests, into the run's feature store on Redis",
  epilog: [
    "It waits for the trainer's run manifest, refuses (exit 1) a target or capture that differs from the trainer's, and exits 0 once the trainer finished the run.",
    'Ctrl-C (SIGINT/SIGTERM) stops after the current capture and exits 130; a second one exits at once.',
    'exit codes: 0 the run finished, 1 refused or failed, 2 usage error, 130 interrupted',
  ].join('\n'),
  options: [
    textSpec('--cluster', 'cluster', 'url', 'the Redis of the run, redis://host:port/db (the --cluster of its trainer)', undefined, true),
    textSpec('--run', 'run', 'name', 'the run id (the --run of its trainer)', undefined, true),
    textSpec(
      '--target',
      'target',
      'dir|ORG/NAME[@REV]',
      "Hugging Face target (a model directory, or an id read from or downloaded into the Hugging Face cache): the trainer's target (its config and precision are checked against the run manifest)",
      undefined,
      true,
    ),
    TARGET_PRECISION,
    intSpec('--batch', 'batch', { min: 1, max: 65_536 }, 'prompts leased per capture (one batched forward)', 4),
    intSpec('--poll-ms', 'pollMs', { min: 1, max: 60_000 }, 'milliseconds between asks when nothing is leasable', 50),
    textSpec(
      '--worker-id',
      'workerId',
      'id',
      'the member id of this worker in the run (unique per worker)',
      'rollout-<8 random hex digits>',
    ),
    intSpec(
      '--wait-ms',
      'waitMs',
      { min: 0, max: 86_400_000 },
      "milliseconds to wait for the trainer's run manifest before giving up",
      60_000,
    ),
  ],
};

export function rolloutArgs(parsed: ParsedArgs): RolloutArgs {
  const v = parsed.values as Partial<RolloutArgs> & { cluster: string; run: string; target: string };
  if (v.workerId !== undefined && !/^[\w.:@-]{1,128}$/.test(v.workerId))
    throw new UsageError(`--worker-id: ${JSON.stringify(v.workerId)} must be 1-128 letters, digits or _ . : @ -`);
  return {
    cluster: clusterUrl('--cluster', v.cluster),
    run: runName('--run', v.run),
    target: v.target,
    targetPrecision: v.targetPrecision ?? 'f32',
    batch: v.batch ?? 4,
    pollMs: v.pollMs ?? 50,
    workerId: v.workerId,
    waitMs: v.waitMs ?? 60_000,
  };
}

export function statusArgs(parsed: ParsedArgs): StatusArgs {
  const v = parsed.values as { cluster: string; run: string; format?: string };
  return {
    cluster: clusterUrl('--cluster', v.cluster),
    run: runName('--run', v.run),
    format: (v.format ?? 'text') as StatusArgs['format'],
  };
}
